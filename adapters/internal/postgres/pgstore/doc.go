// Package pgstore keeps SKU definitions, the append-only ledger and the
// records around it in PostgreSQL, one store type per port role, all over
// one *pgxpool.Pool:
//
//   - PostgresSKUStore: the skus table (definitions and lifecycle);
//   - PostgresLedgerStore: the ledger as the service, recovery and the chain
//     verifier read it;
//   - PostgresProjectionStore: where the projector writes, and its dead letters;
//   - PostgresBalanceStore: recomputes the balances projection from the ledger;
//   - PostgresAuditStore: the audit queries;
//   - PostgresLedgerSnapshotStore: the ledger as the reconciler reads it;
//   - PostgresReconciliationStore: reconciliation runs and their findings;
//   - PostgresBuyerArchiveStore: the buyers of closed sales;
//   - PostgresAdjustmentStore: manual stock adjustments.
//
// It translates PostgreSQL errors into the domain's sentinels at this
// boundary (errors.go), so callers never inspect driver errors.
package pgstore
