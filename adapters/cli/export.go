package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/amqpexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/server"
)

// exportFlags registers the broker export's settings on env into ec.
func exportFlags(env *EnvFlags, ec *server.ExportConfig) {
	env.URL(&ec.NATSURL, "export-nats-url", "INVLEDGER_EXPORT_NATS_URL", "",
		"NATS URL (nats://[user:password@]host:port) to export every ledger event to JetStream (unset: no NATS export)")
	env.String(&ec.NATSStream, "export-nats-stream", "INVLEDGER_EXPORT_NATS_STREAM", natsexport.DefaultStream, "JetStream stream of the export")
	env.Bool(&ec.NATSCreateStream, "export-nats-create-stream", "INVLEDGER_EXPORT_NATS_CREATE_STREAM", true,
		"create the stream when missing (false: refuse, the operator creates it)")
	env.Duration(&ec.NATSDuplicateWindow, "export-nats-duplicate-window", "INVLEDGER_EXPORT_NATS_DUPLICATE_WINDOW", natsexport.DefaultDuplicateWindow,
		"de-duplication window of a stream the export creates")
	env.URL(&ec.AMQPURL, "export-amqp-url", "INVLEDGER_EXPORT_AMQP_URL", "",
		"AMQP 0-9-1 URL (amqp[s]://user:password@host:port/vhost) to export every ledger event to RabbitMQ (unset: no AMQP export)")
	env.String(&ec.AMQPExchange, "export-amqp-exchange", "INVLEDGER_EXPORT_AMQP_EXCHANGE", amqpexport.DefaultExchange, "topic exchange of the AMQP export")
	env.String(&ec.Prefix, "export-prefix", "INVLEDGER_EXPORT_PREFIX", brokerexport.DefaultPrefix, "prefix of the export's subjects and routing keys: <prefix>.<sku token>")
}

func newExportCmd(config func() (Config, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Operate the broker export",
		Long: `The broker export (serve's export component) publishes every ledger event to
NATS JetStream and RabbitMQ. export replay publishes again what a consumer lost.`,
	}
	cmd.AddCommand(newExportReplayCmd(config))
	return cmd
}

func newExportReplayCmd(config func() (Config, error)) *cobra.Command {
	var (
		ec      server.ExportConfig
		sku     string
		fromSeq int64
		since   string
	)
	cmd := &cobra.Command{
		Use:   "replay (--sku S --from-seq N | --since TIME)",
		Short: "Publish again the events of a SKU from a seq, or of every SKU from a time",
		Long: `replay publishes again, to every broker set (--export-nats-url, --export-amqp-url),
the ledger events of --sku from --from-seq on, or of every SKU that happened
at or after --since (RFC 3339), up to the ledger's end when it starts. It
skips the order check: the messages carry the same ids (Nats-Msg-Id,
message-id = the event id), so a consumer that de-duplicates by event id
sees nothing twice, and JetStream drops them within its de-duplication window.
It does not move the export's cursors, and can run while serve exports.`,
		Example: `  invledger export replay --sku phone-x --from-seq 120 --export-nats-url nats://127.0.0.1:4222
  invledger export replay --since 2026-11-11T00:00:00Z --export-amqp-url amqp://user:pass@mq:5672/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config()
			if err != nil {
				return err
			}
			var from time.Time
			switch {
			case sku != "" && since != "", sku == "" && since == "":
				return usageError{errors.New("give --sku with --from-seq, or --since")}
			case sku != "" && fromSeq < 1:
				return usageError{errors.New("--from-seq must be at least 1")}
			case since != "":
				if from, err = time.Parse(time.RFC3339, since); err != nil {
					return usageError{fmt.Errorf("--since %q is not an RFC 3339 time such as 2026-11-11T00:00:00Z", since)}
				}
			}
			if !ec.Enabled() {
				return usageError{errors.New("set --export-nats-url (INVLEDGER_EXPORT_NATS_URL) or --export-amqp-url (INVLEDGER_EXPORT_AMQP_URL)")}
			}
			if err := ec.Validate(); err != nil {
				return usageError{err}
			}
			return replay(cmd, c, ec, sku, fromSeq, from)
		},
	}
	env := NewEnvFlags(cmd.Flags())
	exportFlags(env, &ec)
	cmd.Flags().StringVar(&sku, "sku", "", "the SKU to replay")
	cmd.Flags().Int64Var(&fromSeq, "from-seq", 0, "the first seq of --sku to publish again")
	cmd.Flags().StringVar(&since, "since", "", "replay every SKU's events that happened at or after this time (RFC 3339)")
	cmd.PreRunE = func(*cobra.Command, []string) error { return env.Err() }
	return cmd
}

func replay(cmd *cobra.Command, c Config, ec server.ExportConfig, sku string, fromSeq int64, since time.Time) error {
	ctx := cmd.Context()
	a, err := app.New(ctx, c.AppConfig())
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.CheckSchema(ctx); err != nil {
		return err
	}
	return server.ReplayExport(ctx, a, ec, server.ReplayFrom{SKU: sku, Seq: fromSeq, Since: since}, func(broker string, n int) {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d events published again\n", broker, n)
	})
}
