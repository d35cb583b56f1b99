package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/amqpexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/ledger"
)

// ExportConfig configures the broker export, the export component: it
// runs when a broker URL is set.
type ExportConfig struct {
	// NATSURL, if set, exports to NATS JetStream: stream NATSStream,
	// which the export creates, with NATSDuplicateWindow, when
	// NATSCreateStream is set (the CLI's default; serve does not default
	// it), and otherwise requires.
	NATSURL             string
	NATSStream          string
	NATSCreateStream    bool
	NATSDuplicateWindow time.Duration
	// AMQPURL, if set, exports to RabbitMQ's topic exchange AMQPExchange.
	AMQPURL      string
	AMQPExchange string
	// Prefix prefixes subjects and routing keys. Default
	// brokerexport.DefaultPrefix.
	Prefix string
	// MinBackoff and MaxBackoff bound the wait after a failure. Defaults:
	// brokerexport.Config's.
	MinBackoff, MaxBackoff time.Duration
}

// Enabled reports whether a broker is set.
func (c ExportConfig) Enabled() bool { return c.NATSURL != "" || c.AMQPURL != "" }

// Validate reports every invalid export setting, naming flag and variable
// and showing URLs with their password masked.
func (c ExportConfig) Validate() error {
	var errs []error
	if c.NATSURL != "" {
		if err := checkURL(c.NATSURL, "nats", "tls"); err != nil {
			errs = append(errs, &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: err})
		}
	}
	if c.AMQPURL != "" {
		if err := checkURL(c.AMQPURL, "amqp", "amqps"); err != nil {
			errs = append(errs, &brokerexport.SettingError{Setting: brokerexport.SettingAMQPURL, Err: err})
		}
	}
	if c.Prefix != "" {
		errs = append(errs, brokerexport.CheckPrefix(c.Prefix))
	}
	if c.NATSDuplicateWindow != 0 && c.NATSDuplicateWindow < time.Second {
		errs = append(errs, &brokerexport.SettingError{Setting: brokerexport.SettingNATSDuplicates, Err: errors.New("must be at least 1s")})
	}
	return errors.Join(errs...)
}

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err == nil && u.Host != "" {
		for _, s := range schemes {
			if u.Scheme == s {
				return nil
			}
		}
	}
	return fmt.Errorf("%q is not a URL of scheme %s://", app.RedactURL(raw), strings.Join(schemes, ":// or "))
}

// publishers returns a publisher per broker ec sets, not yet connected.
func publishers(ec ExportConfig, log *slog.Logger) ([]brokerexport.Publisher, error) {
	var pubs []brokerexport.Publisher
	if ec.NATSURL != "" {
		p, err := natsexport.New(natsexport.Config{URL: ec.NATSURL, Stream: ec.NATSStream, Prefix: ec.Prefix,
			CheckStreamOnly: !ec.NATSCreateStream, DuplicateWindow: ec.NATSDuplicateWindow, Logger: log})
		if err != nil {
			return nil, err
		}
		pubs = append(pubs, p)
	}
	if ec.AMQPURL != "" {
		p, err := amqpexport.New(amqpexport.Config{URL: ec.AMQPURL, Exchange: ec.AMQPExchange, Prefix: ec.Prefix, Logger: log})
		if err != nil {
			return nil, err
		}
		pubs = append(pubs, p)
	}
	return pubs, nil
}

// ReplayFrom is where export replay starts: after Seq of SKU, or, with no
// SKU, from each SKU's first event recorded at or after Since.
type ReplayFrom struct {
	SKU   string
	Seq   int64
	Since time.Time
}

// ReplayExport publishes the ledger's events again from where from says to
// every broker ec sets, reporting each broker's count as it finishes; the
// brokers drop what they already hold by message id (export replay).
func ReplayExport(ctx context.Context, a *app.Application, ec ExportConfig, from ReplayFrom, report func(broker string, n int)) error {
	store := pgstore.NewPostgresExportStore(a.Pool)
	seqs := map[string]int64{from.SKU: from.Seq}
	if from.SKU == "" {
		var err error
		if seqs, err = store.FirstSeqs(ctx, from.Since); err != nil {
			return err
		}
	}
	pubs, err := publishers(ec, a.Log)
	if err != nil {
		return err
	}
	for _, p := range pubs {
		n, err := brokerexport.Replay(ctx, store, p, seqs)
		_ = p.Close()
		if err != nil {
			return fmt.Errorf("replay to %s after %d events: %w", p.Broker(), n, err)
		}
		report(p.Broker(), n)
	}
	return nil
}

// exporters builds one exporter per broker set.
func exporters(a *app.Application, ec ExportConfig) ([]*brokerexport.Exporter, error) {
	pubs, err := publishers(ec, a.Log)
	if err != nil {
		return nil, err
	}
	store := pgstore.NewPostgresExportStore(a.Pool)
	out := make([]*brokerexport.Exporter, 0, len(pubs))
	for _, p := range pubs {
		e, err := brokerexport.New(brokerexport.Config{Store: store, Publisher: p, MinBackoff: ec.MinBackoff, MaxBackoff: ec.MaxBackoff,
			Metrics: approot.Of(a).ExportMetrics, Logger: a.Log})
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// exportComponent runs the exporters while this process leads the
// export: one process of a deployment exports, and a standby takes over
// within a second of its death.
func exportComponent(a *app.Application, exps []*brokerexport.Exporter) (_ component, leading func() bool) {
	lock := pgstore.NewPostgresAdvisoryLock(a.Pool, "broker-export-leader")
	var lead atomic.Bool
	return component{"export", func(ctx context.Context) error {
		return ledger.RunAsLeader(ctx, ledger.LeaderConfig{Name: "broker export", Lock: lock, Poll: time.Second,
			OnLeading: func(l bool) { lead.Store(l); approot.Of(a).ExportMetrics.SetLeader(l) }, Logger: a.Log},
			func(ctx context.Context) error {
				done := make(chan struct{}, len(exps))
				for _, e := range exps {
					go func() { _ = e.Run(ctx); done <- struct{}{} }() // Run reports its failures itself, and returns nil
				}
				for range exps {
					<-done
				}
				return nil
			})
	}}, lead.Load
}

// exportNotes are the readiness notes of the export: reported, never
// needed, since a broker that is down delays only the export, not sales.
func exportNotes(exps []*brokerexport.Exporter, leading func() bool) []httpapi.ReadinessNote {
	var out []httpapi.ReadinessNote
	for _, e := range exps {
		s := e.Status()
		v := "ok"
		switch {
		case !leading():
			v = "standby"
		case s.Err != nil:
			v = "failing"
		}
		out = append(out, httpapi.ReadinessNote{Name: "export_" + s.Broker, Value: v})
	}
	return out
}
