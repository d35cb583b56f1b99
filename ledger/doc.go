// Package ledger is the application layer of invledger: its use cases, and
// the ports through which they reach Redis and PostgreSQL. It speaks only
// domain types; adapters/internal/redis/redisinventory and adapters/internal/postgres/pgstore
// implement the ports, and app wires them.
//
// Go callers use it in-process, so a purchase costs one Redis round trip
// and no network hop of ours; the HTTP API and the CLI are thin adapters
// over it.
//
// # Use cases
//
//   - [Service] creates, warms and sells SKUs: CreateSKU, Warm, Deduct,
//     Release, State (service.go).
//   - [Holds] reserves units while the buyer pays, and ends a hold once:
//     Reserve, Confirm, Cancel, Hold (holds.go).
//   - [Orders] reserves several SKUs for one buyer, all or none, as its
//     lines' holds: Place, Confirm, Cancel, Order, Settle (orders.go).
//   - [HoldExpiry] expires the holds whose deadline passed and settles
//     their orders, on a timer in every serve (expiry.go).
//   - [Recovery] rebuilds the ledger's views: Redis after it lost its data
//     (RestoreSKU, RestoreAll), a SKU's records (RepairSKU, RepairRecord),
//     the balances projection (RebuildBalance, RebuildBalances) (restore.go,
//     rebuild.go, records.go).
//   - [Archiver] ends a sale: CloseSKU, then ArchiveBuyers (buyers from
//     Redis to SQL once the ledger vouches for them), then RetireSKU (out of
//     Redis); ArchiveClosed and RetireClosed do it for every due SKU
//     (archive.go, retire.go).
//   - [Adjustments] is the only way stock changes by hand: Request, then a
//     second person's Approve (or Reject), which applies, records and
//     reconciles it; List (adjustments.go).
//   - [Auditor] answers the audit queries from the ledger alone: History,
//     UserEvents, Buyers, BalanceAt, Operations (audit.go, operations.go).
//   - [VerifyChains] recomputes the tamper-evident chain's seals from the
//     ledger and names the first broken seq of each SKU (verify.go).
//   - [Catalog] lists the defined SKUs with their state in Redis and in the
//     ledger, a page at a time (catalog.go).
//   - [DeadLetters] lets an operator list, replay and resolve what the
//     projector dead-lettered (deadletters.go).
//   - [Webhooks] manages the business-event webhook subscriptions: Create,
//     List, Delete, Rotate; delivery is adapters/internal/webhooks/eventwebhook's
//     (webhooks.go).
//   - [RunAsLeader] runs a role (the reconciler, the stream janitor, the
//     event webhooks' delivery) in exactly one process of a deployment,
//     under a shared [Lock] (leader.go).
//
// [InventoryMetrics] (metrics.go) and [ReceiptJournal] (journal.go) wrap the
// purchase path's ports: the first measures every script call, the second
// remembers the sales acknowledged in Redis's everysec window.
//
// # Ports
//
// Each is an interface that the package declares beside the use case that
// needs it, and that an adapter implements; a test fails when one is
// missing here.
//
// Purchases, holds and orders, in Redis with the ledger as fallback:
//   - [Inventory], [SKUStore], [LedgerReader] (ports.go)
//   - [HoldInventory], [HoldHistory] (holds.go)
//   - [OrderInventory], [OrderHistory] (orders.go)
//   - [HoldExpirer] (expiry.go)
//
// Recovery and the end of a sale:
//   - [LedgerScanner], [SKUCatalog], [BalanceRecomputer], [InventoryRestorer],
//     [InventoryArchiver], [BuyerArchiveStore] (recovery_ports.go)
//   - [RecordRewriter] (records.go)
//
// Adjustments: [AdjustmentStore], [StockAdjuster] and the function type
// [SKUReconciler] (adjustments.go).
//
// Audit and operators' views:
//   - [AuditStore], [SKUDefinitions] (audit.go)
//   - [OperationLog] (operations.go): written by Service, Recovery and
//     Archiver, read by Auditor
//   - [ChainScanner] (verify.go)
//   - [SKUPager], [InventoryStates] (catalog.go)
//   - [DeadLetterStore], [EventAppender] and the function type
//     [EntryDecoder] (deadletters.go)
//   - [WebhookStore] (webhooks.go)
//
// Leadership: [Lock], [Lease] (leader.go).
package ledger
