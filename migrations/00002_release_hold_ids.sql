-- +goose Up
-- The release of a confirmed hold's sale carries the hold's id (and its
-- order's), so the ledger alone tells that the sale of a hold, or of an
-- order's line, was undone. A release of a deduction still has none. The
-- new check is looser than the old one, so every row meets it: added NOT
-- VALID and validated after, the scan does not block appends.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_hold_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_hold_check CHECK (
    CASE
        WHEN type IN ('reserved', 'confirmed', 'cancelled', 'expired') THEN hold_id IS NOT NULL
        WHEN type = 'released' THEN true
        ELSE hold_id IS NULL
    END
    AND (type = 'reserved') = (expires_at IS NOT NULL)) NOT VALID;
ALTER TABLE ledger_entries VALIDATE CONSTRAINT ledger_entries_hold_check;

-- +goose Down
-- Fails once a release carries a hold id: the old check refuses such rows.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_hold_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_hold_check CHECK (
    (type IN ('reserved', 'confirmed', 'cancelled', 'expired')) = (hold_id IS NOT NULL)
    AND (type = 'reserved') = (expires_at IS NOT NULL));
