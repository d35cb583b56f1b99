// Package app is invledger's composition root: the one place that turns a
// Config into connections, adapters and application services.
//
// Everything that runs invledger opens it through New: every command of the
// invledger CLI, `invledger serve` (through server), the test stack in
// adapters/testkit/stacktest, and Go programs that use the ledger in-process:
//
//	if err := app.Migrate(ctx, databaseURL, logger); err != nil { ... }
//	a, err := app.New(ctx, app.Config{RedisURL: redisURL, DatabaseURL: databaseURL})
//	if err != nil { ... }
//	defer a.Close()
//	cmd, err := ledger.NewDeductCommand("phone-x", "u-42", 1, "order-9f1c")
//	receipt, err := a.Service.Deduct(ctx, cmd)
//
// New never migrates: it checks the schema version, so processes started
// together never queue on the migration lock. Migrate is explicit, for
// `invledger migrate`, `dev`, `demo`, tests and library users.
//
// New makes a Redis client but does not dial it: commands that only read
// SQL (audit queries, rebuild-projections) keep working while Redis is down.
// PingRedis is for the commands that need it.
package app
