// Package approot holds what the composition root (package app) builds
// from internal packages: the concrete adapters and the helpers made for
// them. The packages under adapters/ that run an application (server, the
// CLI, the test stack) reach them with Of; the public API of app names
// none of their types, so nothing outside adapters/ depends on them.
package approot

import (
	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/httpapi/recovering"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/internal/redis/refusals"
	"github.com/invledger/invledger/adapters/internal/webhooks/alertwebhook"
	"github.com/invledger/invledger/adapters/internal/webhooks/egress"
	"github.com/invledger/invledger/adapters/internal/webhooks/eventwebhook"
)

// Parts are what app.New built besides the application's public fields.
type Parts struct {
	Adapters Adapters
	// Keys maps SKUs to partitions and Redis keys; NodeRunWatch learns
	// the node run of every Redis node the application's client connects
	// to.
	Keys         redisinventory.Keyspace
	NodeRunWatch *redisinventory.NodeRunWatch
	// Webhook POSTs alerts to Config.AlertWebhook once Run; nil without one.
	Webhook *alertwebhook.WebhookNotifier
	// Egress guards every webhook request, the alert webhook's and the
	// business-event deliveries alike: Config.WebhookAllowNets are the
	// only internal networks they reach.
	Egress *egress.Guard
	// Refusals counts this process's refused purchases by SKU and reason;
	// serve flushes them to Redis for the console.
	Refusals *refusals.Counter
	// Recovering is the SKUs this process's API refuses as recovering,
	// for /readyz's note and the invledger_recovering_* gauges.
	Recovering *recovering.Tracker
	// AlertMetrics, EventWebhookMetrics and ExportMetrics count the alert
	// webhook's and the business-event webhooks' deliveries and the broker
	// export's publishes, on the application's registry.
	AlertMetrics        *alertwebhook.Metrics
	EventWebhookMetrics *eventwebhook.Metrics
	ExportMetrics       *brokerexport.Metrics
}

// Adapters are the storage adapters the services are built from: one type
// per port role, over one Redis client and one PostgreSQL pool.
type Adapters struct {
	Inventory       *redisinventory.RedisInventory
	Restorer        *redisinventory.RedisRestorer
	Archiver        *redisinventory.RedisArchiver
	ReconcileSource *redisinventory.RedisReconcileSource
	NodeRuns        *redisinventory.RedisNodeRuns
	Sweeper         *redisinventory.Sweeper

	SKUs            *pgstore.PostgresSKUStore
	Ledger          *pgstore.PostgresLedgerStore
	Projection      *pgstore.PostgresProjectionStore
	Balances        *pgstore.PostgresBalanceStore
	Audit           *pgstore.PostgresAuditStore
	Snapshots       *pgstore.PostgresLedgerSnapshotStore
	Reconciliations *pgstore.PostgresReconciliationStore
	BuyerArchives   *pgstore.PostgresBuyerArchiveStore
	Adjustments     *pgstore.PostgresAdjustmentStore
	Operations      *pgstore.PostgresOperationStore
	DeadLetters     *pgstore.PostgresDeadLetterStore
	Idempotency     *pgstore.PostgresIdempotencyStore
	// ConsoleSessions records console sign-ins and sign-outs.
	ConsoleSessions *pgstore.PostgresConsoleSessionStore
	Seals           *pgstore.PostgresSealStore
	Webhooks        *pgstore.PostgresWebhookStore
	// ReconcilerLeader elects the one process that runs the periodic
	// reconciler; JanitorLeader the one that trims streams; RepairLock
	// serialises every reconciliation that repairs.
	ReconcilerLeader *pgstore.PostgresAdvisoryLock
	JanitorLeader    *pgstore.PostgresAdvisoryLock
	RepairLock       *pgstore.PostgresAdvisoryLock
	// WebhookLeader elects the one process that delivers business-event
	// webhooks.
	WebhookLeader *pgstore.PostgresAdvisoryLock
}

// Of returns the parts of an *app.Application. Package app sets it when it
// is initialised: approot cannot import app, which imports approot.
var Of func(application any) *Parts
