-- +goose Up
-- Holds: a reserved event takes units out of available stock until a
-- confirmed (the units stay sold), cancelled or expired (they come back)
-- event ends the hold. Every hold event carries its hold_id, and its
-- order_id when the hold is a line of an order, so the ledger alone tells
-- what happened to a hold or an order; the reserved event carries the
-- deadline. Adding nullable columns rewrites no row, so the append-only
-- triggers are not involved.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_type_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_type_check CHECK (type IN (
    'stocked', 'deducted', 'released', 'adjusted', 'reserved', 'confirmed', 'cancelled', 'expired'));
ALTER TABLE ledger_entries
    ADD COLUMN hold_id    uuid,
    ADD COLUMN order_id   text,
    ADD COLUMN expires_at timestamptz,
    ADD CONSTRAINT ledger_entries_hold_check CHECK (
        (type IN ('reserved', 'confirmed', 'cancelled', 'expired')) = (hold_id IS NOT NULL)
        AND (type = 'reserved') = (expires_at IS NOT NULL));
CREATE INDEX ledger_entries_hold_idx ON ledger_entries (hold_id) WHERE hold_id IS NOT NULL;
CREATE INDEX ledger_entries_order_idx ON ledger_entries (order_id) WHERE order_id IS NOT NULL;

-- balances keeps held units beside available ones: balance is available
-- stock, held the units of open holds.
ALTER TABLE balances ADD COLUMN held bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE balances DROP COLUMN held;
DROP INDEX ledger_entries_order_idx;
DROP INDEX ledger_entries_hold_idx;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_hold_check;
ALTER TABLE ledger_entries DROP COLUMN expires_at, DROP COLUMN order_id, DROP COLUMN hold_id;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_type_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_type_check CHECK (type IN ('stocked', 'deducted', 'released', 'adjusted'));
