package app_test

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"os"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// ExampleNew opens the application a Go program sells through in-process:
// the same wiring serve runs, over your Redis and PostgreSQL. Migrate
// once per database; run the projector somewhere (serve --components
// projector, or server.Serve in this program) so the ledger follows.
func ExampleNew() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	databaseURL := os.Getenv("INVLEDGER_DATABASE_URL")
	if err := app.Migrate(ctx, databaseURL, logger); err != nil {
		log.Fatal(err)
	}
	a, err := app.New(ctx, app.Config{
		RedisURL:    os.Getenv("INVLEDGER_REDIS_URL"),
		DatabaseURL: databaseURL,
		Durability:  app.DurabilityStrict, // every purchase fsynced by Redis before it is answered
		Logger:      logger,
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, domain.ErrUnavailable): a server cannot be reached
	}
	defer a.Close()

	cmd, err := ledger.NewDeductCommand("phone-x", "u-42", 1, "order-9f1c") // names a bad field
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := a.Service.Deduct(ctx, cmd)
	switch {
	case errors.Is(err, domain.ErrSoldOut):
		log.Print("sold out")
	case err != nil:
		log.Printf("%s: %v", domain.CodeOf(err), err) // the code the HTTP API and the CLI would give
	default:
		log.Printf("bought: seq %d, %d left", receipt.Seq, receipt.Remaining)
	}
}
