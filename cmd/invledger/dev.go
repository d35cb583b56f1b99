package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/localstack"
)

func newDevCmd(cfg *Config) *cobra.Command {
	var (
		dir string
		ss  serveSettings
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a private Redis and PostgreSQL under ./.invledger and serve against them",
		Long: `dev starts a redis-server (AOF on) and a PostgreSQL from this machine's binaries,
on free ports, with their data under --dir. It migrates the database, prints
the URLs and the API tokens, and serves until SIGINT or SIGTERM, then stops
both servers. Data and tokens survive restarts; delete the directory to start over.`,
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
			log := newLogger(c.LogLevel)
			stack, err := localstack.StartStack(ctx, localstack.StackConfig{Dir: abs, AppendFsync: appendFsync(ss.Durability), Logger: log})
			if err != nil {
				return err
			}
			defer stack.Stop()
			c.RedisURL, c.DatabaseURL, c.RedisCluster = stack.Redis.URL(), stack.DatabaseURL, nil
			if err := c.Validate(); err != nil {
				return err
			}
			if err := app.Migrate(ctx, c.DatabaseURL, log); err != nil {
				return err
			}
			if ss.Tokens, err = devTokens(abs); err != nil {
				return err
			}
			ss.OnListening = func(addr string) { printDevBanner(cmd, c, ss, addr) }
			return serve(ctx, c, ss)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".invledger", "where the servers keep their data")
	env := &envFlags{fs: cmd.Flags()}
	env.String(&ss.Listen, "listen", "INVLEDGER_LISTEN", "127.0.0.1:8080", "HTTP listen address")
	env.String(&ss.Durability, "durability", "INVLEDGER_DURABILITY", app.DurabilityStrict, "strict (Redis appendfsync always) or everysec")
	ss.ArchiveAfter = 24 * time.Hour
	cmd.PreRunE = func(*cobra.Command, []string) error { return env.Err() }
	return cmd
}

func printDevBanner(cmd *cobra.Command, c Config, ss serveSettings, addr string) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "\ninvledger dev is running. Ctrl-C stops it and both servers.\n\n")
	fmt.Fprintf(w, "  API          http://%s\n", addr)
	fmt.Fprintf(w, "  metrics      http://%s/metrics\n", addr)
	fmt.Fprintf(w, "  Redis        %s\n", c.RedisURL)
	fmt.Fprintf(w, "  PostgreSQL   %s\n\n", c.DatabaseURL)
	fmt.Fprintf(w, "Tokens (name:role:secret):\n")
	for _, t := range strings.Split(ss.Tokens, "\n") {
		fmt.Fprintf(w, "  %s\n", t)
	}
	fmt.Fprintf(w, "\nTo use the CLI against this stack:\n  export INVLEDGER_REDIS_URL=%s INVLEDGER_DATABASE_URL='%s'\n\n", c.RedisURL, c.DatabaseURL)
}
