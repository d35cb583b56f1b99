-- +goose Up
-- balance-at sums a SKU's deltas up to an instant. With delta in the index,
-- PostgreSQL answers it from the index alone (an index-only scan) instead
-- of fetching one table row per event. It replaces the index on the same
-- key rather than sitting beside it, so the projector's inserts maintain
-- one index, not two.
--
-- Not CONCURRENTLY: goose runs each migration in a transaction. Building it
-- blocks ledger inserts for the build's duration (about a second per
-- million rows); the projector waits and catches up, and Redis keeps
-- selling meanwhile.
CREATE INDEX ledger_entries_sku_time_delta_idx ON ledger_entries (sku, occurred_at) INCLUDE (delta);
DROP INDEX ledger_entries_sku_time_idx;

-- +goose Down
CREATE INDEX ledger_entries_sku_time_idx ON ledger_entries (sku, occurred_at);
DROP INDEX ledger_entries_sku_time_delta_idx;
