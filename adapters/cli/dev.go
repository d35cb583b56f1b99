package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/devstack"
	"github.com/invledger/invledger/adapters/internal/console"
	"github.com/invledger/invledger/adapters/testkit/localstack"
)

func newDevCmd(cfg *Config) *cobra.Command {
	var (
		dir string
		ss  ServeSettings
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a private Redis and PostgreSQL under ./.invledger and serve against them",
		Long: `dev starts a redis-server (AOF on) and a PostgreSQL from this machine's binaries,
with their data under --dir. It migrates the database, prints the URLs and
the API tokens as export lines to paste into a shell (also written to
--dir/env, for "source .invledger/env", with the seal key it keeps in
--dir/seal-keys unless --seal-keys gives one), and serves until SIGINT or SIGTERM,
then stops both servers. Data, tokens and ports survive restarts: each
server gets its previous port back when it is free, so the exported URLs stay
valid. Delete the directory to start over.`,
		Example: "  invledger dev\n  invledger dev --dir /tmp/sale --listen 127.0.0.1:9090",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			c := *cfg
			c.setDefaults()
			log := c.Logger()
			stack, err := localstack.StartStack(ctx, localstack.StackConfig{Dir: abs, AppendFsync: AppendFsync(ss.Durability), Logger: log, KeepPorts: true})
			if err != nil {
				return err
			}
			defer stack.Stop()
			c.RedisURL, c.DatabaseURL, c.RedisCluster, c.RedisSentinels, c.RedisSentinelMaster = stack.Redis.URL(), stack.DatabaseURL, nil, nil, ""
			if err := c.Validate(); err != nil {
				return err
			}
			if err := app.Migrate(ctx, c.DatabaseURL, log); err != nil {
				return err
			}
			if ss.Tokens, err = devstack.Tokens(abs); err != nil {
				return err
			}
			// The ledger is sealed with a key of the dev stack's own, unless
			// --seal-keys gives one.
			if c.SealKeys == "" {
				if c.SealKeys, err = devstack.SealKeys(abs); err != nil {
					return err
				}
			}
			ss.DataDir = abs
			var bannerErr error
			ss.OnListening = func(addr string) { bannerErr = printDevBanner(cmd.OutOrStdout(), abs, c, ss.Tokens, addr) }
			return errors.Join(Serve(ctx, c, ss), bannerErr)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".invledger", "where the servers keep their data")
	env := &EnvFlags{fs: cmd.Flags()}
	env.String(&ss.Listen, "listen", "INVLEDGER_LISTEN", "127.0.0.1:8080", "HTTP listen address")
	env.String(&ss.Durability, "durability", "INVLEDGER_DURABILITY", app.DurabilityStrict, "strict (Redis appendfsync always) or everysec")
	ss.ArchiveAfter = 24 * time.Hour
	ss.RetireAfter = 24 * time.Hour
	// Receivers on this machine are what one tries webhooks with; the
	// banner says that serve refuses them.
	ss.WebhookAllowNets = devWebhookAllowNets
	cmd.PreRunE = func(*cobra.Command, []string) error { return env.Err() }
	return cmd
}

// devWebhookAllowNets are the internal networks dev's webhooks may reach.
var devWebhookAllowNets = []string{"127.0.0.0/8"}

// printDevBanner prints where the stack listens, and the export lines that
// the examples of docs/api.md and docs/cli.md and the CLI need, which it also writes to dir/env.
func printDevBanner(w io.Writer, dir string, c Config, tokens, addr string) error {
	env := devstack.Env("http://"+addr, c.RedisURL, c.DatabaseURL, tokens, c.SealKeys)
	fmt.Fprintf(w, "\ninvledger dev is running. Ctrl-C stops it and both servers.\n\n")
	fmt.Fprintf(w, "  API          http://%s\n", addr)
	fmt.Fprintf(w, "  console      http://%s%s (sign in with an auditor's, operator's or approver's token)\n", addr, console.Root)
	fmt.Fprintf(w, "  metrics      http://%s/metrics\n", addr)
	fmt.Fprintf(w, "  Redis        %s\n", c.RedisURL)
	fmt.Fprintf(w, "  PostgreSQL   %s\n", c.DatabaseURL)
	fmt.Fprintf(w, "  Webhooks     may reach %s (serve reaches no internal address unless --webhook-allow-nets names it)\n\n",
		strings.Join(devWebhookAllowNets, ", "))
	fmt.Fprintf(w, "Tokens (name:role:secret):\n")
	for _, t := range strings.Split(tokens, "\n") {
		fmt.Fprintf(w, "  %s\n", t)
	}
	fmt.Fprintf(w, "\nPaste this into a shell for the examples of docs/api.md and the CLI (or: source %s):\n\n%s\n",
		filepath.Join(dir, "env"), env)
	return os.WriteFile(filepath.Join(dir, "env"), []byte(env), 0o600)
}
