package server

import (
	"context"
	"net/http"
	"sync"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/console"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/internal/redis/eventtail"
	"github.com/invledger/invledger/adapters/internal/redis/refusals"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections"
)

// newConsole builds the console over the same services and tokens as api.
func newConsole(a *app.Application, sc Config, tokens *httpapi.TokenSet, api http.Handler) (*console.Console, error) {
	key := []byte(sc.ConsoleKey)
	if len(key) == 0 {
		key = console.GenerateKey()
		a.Log.Warn("console: no --console-key (INVLEDGER_CONSOLE_KEY): sessions use a generated key, so they end when this process stops and no other serve process accepts them")
	}
	return console.New(console.Config{
		API: api, Tokens: tokens, Sessions: approot.Of(a).Adapters.ConsoleSessions, Key: key, IdleTimeout: sc.ConsoleIdleTimeout,
		SecureCookie: sc.ConsoleSecureCookie,
		Follow: func(ctx context.Context, p int, fn func(domain.Event) error) error {
			// The tail owns its client (the subscriber closes it): one
			// small pool per watched partition, beside the purchase path's.
			client, err := app.NewRedisClient(a.Config(), 2)
			if err != nil {
				return err
			}
			return eventtail.Follow(ctx, eventtail.Config{Client: client, Keys: approot.Of(a).Keys, Partition: &p, Logger: a.Log}, fn)
		},
		Partition: approot.Of(a).Keys.Partition,
		// A quarter of the connection cap at most is held by feeds: the
		// rest stays for purchases and pages.
		FeedLimits: console.FeedLimits{Total: max(1, sc.MaxConns/4)},
		State:      a.Service.State,
		Health:     consoleHealth(a),
		Refusals: func(ctx context.Context, sku string) (map[string]int64, error) {
			return refusals.Read(ctx, a.Redis, approot.Of(a).Keys, sku)
		},
		SignInFailed: func(reason string) { a.Metrics.ConsoleSignInFailures.WithLabelValues(reason).Inc() },
		Logger:       a.Log,
	})
}

// consoleHealth reads what the console's Health page shows.
func consoleHealth(a *app.Application) func(ctx context.Context) console.Health {
	return func(ctx context.Context) console.Health {
		h := console.Health{Durability: a.Config().Durability, DeadLetters: -1}
		var wg sync.WaitGroup
		var redisErr, pgErr error
		wg.Go(func() { redisErr = a.PingRedis(ctx) })
		wg.Go(func() { pgErr = a.PingPostgres(ctx) })
		wg.Wait()
		h.Redis, h.Postgres = redisErr == nil, pgErr == nil
		if h.Redis {
			for p := range approot.Of(a).Keys.Partitions() {
				stream := approot.Of(a).Keys.StreamKey(p)
				groups, err := a.Redis.XInfoGroups(ctx, stream).Result()
				if err != nil {
					continue // a stream not written yet has no group
				}
				for _, g := range groups {
					if g.Name == projections.ConsumerGroup {
						h.Partitions = append(h.Partitions, console.PartitionLag{Stream: stream, Lag: g.Lag, Pending: g.Pending})
					}
				}
			}
		}
		if h.Postgres {
			// The page says "1000 or more" past one page.
			if page, err := a.DeadLetters.List(ctx, ledger.DeadLetterQuery{Status: string(ledger.DeadLetterOpen), Limit: 1000}); err == nil {
				h.DeadLetters, h.DeadLettersMore = len(page.DeadLetters), page.NextAfter != nil
			}
			if lags, err := pgstore.NewPostgresExportStore(a.Pool).Lags(ctx); err == nil {
				for _, l := range lags {
					h.Exports = append(h.Exports, console.ExportLag(l))
				}
			}
		}
		return h
	}
}

// refusalFlusher adds this process's refusal counts to Redis once a
// second, over its own one-connection client, so a flush never takes a
// connection from the purchase path.
func refusalFlusher(a *app.Application) (component, error) {
	client, err := app.NewRedisClient(a.Config(), 1)
	if err != nil {
		return component{}, err
	}
	f, err := refusals.NewFlusher(refusals.FlusherConfig{Counter: approot.Of(a).Refusals, Client: client, Keys: approot.Of(a).Keys, Logger: a.Log})
	if err != nil {
		_ = client.Close()
		return component{}, err
	}
	return component{"refusals", func(ctx context.Context) error {
		defer client.Close()
		return f.Run(ctx)
	}}, nil
}
