package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/internal/webhooks/alertwebhook"
	"github.com/invledger/invledger/adapters/internal/webhooks/egress"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/projections/streamentry"
)

// Durability modes: what a Redis crash may lose, and so which Redis
// persistence settings serve accepts.
const (
	// DurabilityStrict needs Redis appendfsync always: no acknowledged
	// purchase is lost when Redis crashes.
	DurabilityStrict = "strict"
	// DurabilityEverysec accepts appendfsync everysec: a crash can lose up
	// to a second, which the receipt journal lets reconciliation name.
	DurabilityEverysec = "everysec"
)

// Config is what New needs to open the application. Only DatabaseURL is
// required.
type Config struct {
	// RedisURL is the Redis for the scripts and streams, redis:// or
	// rediss:// (TLS), with user and password (go-redis ParseURL). Default
	// redis://127.0.0.1:6379/0. With RedisSentinels of bare addresses it
	// gives the master's user, password, TLS and database; with
	// RedisCluster it is ignored.
	RedisURL string
	// RedisCluster, if set, selects Redis Cluster: bare seed addresses, or
	// one cluster URL with credentials and TLS
	// (redis://user:pass@host:port?addr=host2:port2, go-redis ParseClusterURL).
	RedisCluster []string
	// RedisSentinels, if set, selects a Sentinel-managed master: bare
	// Sentinel addresses with RedisSentinelMaster, or one failover URL
	// (go-redis ParseFailoverURL, ?master_name=...).
	RedisSentinels []string
	// RedisSentinelMaster is the name the Sentinels monitor the master under.
	RedisSentinelMaster string
	// DatabaseURL is the PostgreSQL holding the ledger.
	DatabaseURL string
	// Partitions is the partition stream count, fixed for a deployment.
	// Default 16.
	Partitions int
	// Durability is DurabilityStrict (default) or DurabilityEverysec. In
	// everysec mode the purchase path keeps a journal of acknowledged
	// receipts, so a Redis crash's loss can be named.
	Durability string
	// AlertWebhook, if set, receives a JSON POST per alert, signed with
	// AlertWebhookSecret when that is set (see alertwebhook.Config.Secret).
	AlertWebhook       string
	AlertWebhookSecret string
	// WebhookAllowNets are the internal networks (CIDRs) that the alert
	// webhook and the business-event webhooks may still reach; every other
	// address that is not globally reachable is refused (see egress.Guard).
	// Empty in serve; dev and the test kit allow 127.0.0.0/8.
	WebhookAllowNets []string
	// SealKeys key the ledger's seals and checkpoints: id:secret entries
	// (secrets of 32 bytes or more), comma- or newline-separated, the
	// signing key first and older ones after it, kept to verify what they
	// sealed. The secret must live outside PostgreSQL: whoever holds it
	// can forge seals. Empty, seals are unkeyed (release 1.0.0's sha256),
	// which resist no one who can write the database; once the ledger
	// holds a keyed checkpoint, the sealer refuses to run without a key.
	SealKeys string
	// Alerter, if set, receives reconciliation findings instead of
	// Application.Alerts; the CLI, which prints findings itself, silences
	// them.
	Alerter reconcile.Alerter
	// RedisPoolSize is the script client's pool. A purchase holds a
	// connection for one round trip, and a caller waiting for a connection
	// is latency the script never caused, so the default is generous:
	// 64 per CPU plus 256.
	RedisPoolSize int
	// RedisTimeout bounds each call of the purchase path to Redis (warm,
	// deduct, release, adjust, state): a stalled Redis is answered with
	// domain.ErrUnavailable in time for the HTTP answer, so the caller
	// retries with the same request id instead of losing the answer.
	// Default redisinventory.DefaultTimeout (2s).
	RedisTimeout time.Duration
	// MaxBatch is the most concurrent purchase attempts (deducts and
	// reserves) of the SKUs of one partition sent in one script call.
	// Default redisinventory.DefaultMaxBatch.
	MaxBatch int
	// BatchesInFlight is the purchase script calls in flight a partition
	// may have while the process has fewer in flight in all
	// (redisinventory.InventoryConfig.BatchesInFlight). Default
	// redisinventory.DefaultBatchesInFlight.
	BatchesInFlight int
	// StreamEntries is how purchase calls write their events to the
	// streams: streamentry.EntriesPerCall (the default) or
	// EntriesPerEvent, the format of 1.0.0, while a 1.0.0 process still
	// reads the streams during a rolling upgrade.
	StreamEntries streamentry.StreamEntries
	// SKULayout is where the SKUs warmed or restored from now on keep
	// their receipts and buyers' counts: "one-hash" (the default) or
	// "three-hashes", the layout of 1.0, while a 1.0 process still serves
	// during a rolling upgrade (docs/deploy.md, docs/storage.md). Every
	// process reads both.
	SKULayout string
	// Holds bounds the ttl of holds: MaxTTL (default 1h) and DefaultTTL
	// (default 15m).
	Holds domain.HoldConfig
	// Orders bounds orders: MaxLines (default 20).
	Orders domain.OrderConfig
	// Registry receives every metric. Default: a new registry with the Go,
	// process and build-info collectors.
	Registry *prometheus.Registry
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.RedisURL == "" && c.RedisTopology() == TopologySingle {
		c.RedisURL = defaultRedisURL
	}
	if c.Partitions == 0 {
		c.Partitions = redisinventory.DefaultPartitions
	}
	if c.Durability == "" {
		c.Durability = DurabilityStrict
	}
	if c.RedisTimeout == 0 {
		c.RedisTimeout = redisinventory.DefaultTimeout
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = redisinventory.DefaultMaxBatch
	}
	if c.BatchesInFlight == 0 {
		c.BatchesInFlight = redisinventory.DefaultBatchesInFlight
	}
	if c.StreamEntries == "" {
		c.StreamEntries = streamentry.EntriesPerCall
	}
	if c.SKULayout == "" {
		c.SKULayout = string(redisinventory.DefaultSKULayout)
	}
	if c.RedisPoolSize == 0 {
		c.RedisPoolSize = 64*runtime.GOMAXPROCS(0) + 256
	}
	c.Holds.SetDefaults()
	c.Orders.SetDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = NewRegistry()
	}
}

// Validate reports every invalid setting at once, naming the flag and the
// environment variable that set it. Zero values are valid: they mean the
// default.
func (c Config) Validate() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("--database-url (INVLEDGER_DATABASE_URL) is required, e.g. postgres://user@127.0.0.1:5432/invledger; `invledger dev` starts a private stack and prints one"))
	}
	holds, orders := c.Holds, c.Orders // zero values mean the defaults
	holds.SetDefaults()
	orders.SetDefaults()
	errs = append(errs, c.validateRedis(), holds.Validate(), orders.Validate())
	if c.Partitions < 0 || c.Partitions > 1024 {
		errs = append(errs, fmt.Errorf("--partitions (INVLEDGER_PARTITIONS) must be 1-1024, got %d", c.Partitions))
	}
	if c.Durability != "" && c.Durability != DurabilityStrict && c.Durability != DurabilityEverysec {
		errs = append(errs, fmt.Errorf("--durability (INVLEDGER_DURABILITY) must be strict or everysec, got %q", c.Durability))
	}
	guard, err := c.egressGuard()
	if err != nil {
		errs = append(errs, err)
	}
	if c.AlertWebhook != "" {
		if u, err := url.Parse(c.AlertWebhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The URL may carry credentials: the error shows it redacted.
			errs = append(errs, fmt.Errorf("--alert-webhook (INVLEDGER_ALERT_WEBHOOK) %q is not an http(s) URL", RedactURL(c.AlertWebhook)))
		} else if guard != nil {
			if err := guard.CheckURL(c.AlertWebhook); err != nil {
				errs = append(errs, fmt.Errorf("--alert-webhook (INVLEDGER_ALERT_WEBHOOK): %w", err))
			}
		}
	}
	if c.AlertWebhookSecret != "" {
		if err := alertwebhook.CheckSecret(c.AlertWebhookSecret); err != nil {
			errs = append(errs, fmt.Errorf("--alert-webhook-secret (INVLEDGER_ALERT_WEBHOOK_SECRET) %w", err))
		} else if c.AlertWebhook == "" {
			errs = append(errs, errors.New("--alert-webhook-secret (INVLEDGER_ALERT_WEBHOOK_SECRET) signs alerts, but no --alert-webhook (INVLEDGER_ALERT_WEBHOOK) receives them"))
		}
	}
	if _, err := c.sealKeys(); err != nil {
		errs = append(errs, err)
	}
	if c.RedisTimeout < 0 {
		errs = append(errs, fmt.Errorf("--redis-timeout (INVLEDGER_REDIS_TIMEOUT) must not be negative, got %s", c.RedisTimeout))
	}
	if c.MaxBatch < 0 || c.MaxBatch > redisinventory.MaxBatchLimit {
		errs = append(errs, fmt.Errorf("--max-batch (INVLEDGER_MAX_BATCH) must be between 1 and %d, got %d", redisinventory.MaxBatchLimit, c.MaxBatch))
	}
	if c.BatchesInFlight < 0 || c.BatchesInFlight > redisinventory.MaxBatchesInFlight {
		errs = append(errs, fmt.Errorf("--batches-in-flight (INVLEDGER_BATCHES_IN_FLIGHT) must be between 1 and %d, got %d",
			redisinventory.MaxBatchesInFlight, c.BatchesInFlight))
	}
	if c.StreamEntries != "" {
		if err := c.StreamEntries.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--stream-entries (INVLEDGER_STREAM_ENTRIES): %w", err))
		}
	}
	if c.SKULayout != "" {
		if err := redisinventory.SKULayout(c.SKULayout).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--sku-layout (INVLEDGER_SKU_LAYOUT): %w", err))
		}
	}
	if c.RedisPoolSize < 0 {
		errs = append(errs, fmt.Errorf("redis pool size must not be negative, got %d", c.RedisPoolSize))
	}
	return errors.Join(errs...)
}

// sealKeys parses SealKeys; its error names the flag, never a secret.
func (c Config) sealKeys() (domain.SealKeys, error) {
	keys, err := domain.ParseSealKeys(c.SealKeys)
	if err != nil {
		return keys, fmt.Errorf("--seal-keys (INVLEDGER_SEAL_KEYS): %w", err)
	}
	return keys, nil
}

// egressGuard is the guard of every webhook request, allowing
// WebhookAllowNets; its error names the flag.
func (c Config) egressGuard() (*egress.Guard, error) {
	nets, err := egress.ParseNets(c.WebhookAllowNets)
	if err != nil {
		return nil, fmt.Errorf("--webhook-allow-nets (INVLEDGER_WEBHOOK_ALLOW_NETS): %w", err)
	}
	return egress.New(nets), nil
}

// NewLogger returns a logger that writes to w the records at level (debug,
// info, warn or error) and above, in format: text (key=value) or json (one
// JSON object a line, for log collectors). Its errors name the flags and
// variables that set them.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	var errs []error
	if err := l.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level (INVLEDGER_LOG_LEVEL) must be debug, info, warn or error, got %q", level))
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		errs = append(errs, fmt.Errorf("--log-format (INVLEDGER_LOG_FORMAT) must be text or json, got %q", format))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slog.New(h), nil
}
