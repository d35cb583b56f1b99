package cli

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/redis/eventtail"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
)

// newTailCmd is `invledger tail`. It needs Redis only, so it reads cfg
// itself rather than the validated settings, which require a database URL.
func newTailCmd(cfg *Config) *cobra.Command {
	var (
		tc     eventtail.Config
		format string
	)
	cmd := &cobra.Command{
		Use:   "tail --sku SKU [--from-start] [--format text|json]",
		Short: "Follow a SKU's events as Redis appends them",
		Long: `tail prints each event of one SKU as the purchase scripts append it to the
SKU's partition stream, one line an event (--format json: one JSON object a
line), until SIGINT or SIGTERM. It reads Redis only, with a plain XREAD (no
consumer group): it takes nothing from the projector and leaves nothing
behind. --from-start first prints the events the stream still holds (acked
entries are kept for serve's --stream-retention).`,
		Example: "  invledger tail --sku phone-x\n  invledger tail --sku phone-x --from-start --format json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := *cfg
			c.setDefaults()
			keys, kerr := redisinventory.NewKeyspace(c.Partitions)
			_, lerr := app.NewLogger(os.Stderr, c.LogLevel, c.LogFormat)
			if err := errors.Join(kerr, lerr, eventtail.CheckFormat(format)); err != nil {
				return err
			}
			client, err := app.NewRedisClient(c.AppConfig(), 2)
			if err != nil {
				return err
			}
			tc.Client, tc.Keys, tc.Logger = client, keys, c.Logger()
			return eventtail.Follow(cmd.Context(), tc, eventtail.Printer(cmd.OutOrStdout(), format))
		},
	}
	cmd.Flags().StringVar(&tc.SKU, "sku", "", "the SKU to follow (required)")
	cmd.Flags().BoolVar(&tc.FromStart, "from-start", false, "print the events the stream still holds first")
	cmd.Flags().StringVar(&format, "format", eventtail.FormatText, "text or json")
	_ = cmd.MarkFlagRequired("sku")
	return cmd
}
