package natsexport_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
)

// The environment of the exporter process TestExportsExactlyOnceAcrossAKill
// starts from this test binary and kills with -9.
const (
	envChildDatabase = "INVLEDGER_TEST_EXPORT_DATABASE_URL"
	envChildNATS     = "INVLEDGER_TEST_EXPORT_NATS_URL"
	envChildPath     = "INVLEDGER_TEST_EXPORT_PATH"
)

// TestMain runs more tests at once than the machine has cores (-parallel's
// default): this package's tests wait on private brokers, restarts and
// pings, not on the CPU. An explicit -parallel is kept. Started with
// envChildDatabase set, the binary is an exporter process instead, until
// it is killed.
func TestMain(m *testing.M) {
	if url := os.Getenv(envChildDatabase); url != "" {
		if err := runChildExporter(url, os.Getenv(envChildNATS), os.Getenv(envChildPath)); err != nil {
			fmt.Fprintln(os.Stderr, "exporter process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(m.Run())
}

// runChildExporter exports the ledger at databaseURL to natsURL on path
// until it is killed (or for a minute, should its test be gone).
func runChildExporter(databaseURL, natsURL, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	pub, err := natsexport.New(natsexport.Config{URL: natsURL, Path: path, Logger: quiet})
	if err != nil {
		return err
	}
	exp, err := brokerexport.New(brokerexport.Config{Store: pgstore.NewPostgresExportStore(pool), Publisher: pub,
		Metrics: brokerexport.NewMetrics(prometheus.NewRegistry()), Logger: quiet})
	if err != nil {
		return err
	}
	return exp.Run(ctx)
}
