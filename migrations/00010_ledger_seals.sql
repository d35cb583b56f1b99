-- +goose Up
-- ledger_seals holds each SKU's tamper-evident chain, sealed in the ledger
-- off the purchase path: one link per ledger row, written in seq order as
-- rows become contiguous, never changed. hash = algorithm(prev_hash ||
-- the row's canonical fields). Rows projected before the chain moved here
-- carry the SHA-1 link Redis computed (ledger_entries.hash); the sealer
-- keeps it as a 'sha1' seal when it links, and links every other row with
-- SHA-256. `invledger audit verify` recomputes the seals and names the
-- first row that breaks.
CREATE TABLE ledger_seals (
    sku       text NOT NULL,
    seq       bigint NOT NULL CHECK (seq > 0),
    prev_hash text NOT NULL,
    hash      text NOT NULL,
    algorithm text NOT NULL CHECK (algorithm IN ('sha1', 'sha256')),
    sealed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (sku, seq)
);

-- +goose StatementBegin
CREATE FUNCTION ledger_seals_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_seals is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER ledger_seals_no_update_delete
    BEFORE UPDATE OR DELETE ON ledger_seals
    FOR EACH ROW EXECUTE FUNCTION ledger_seals_refuse_change();
CREATE TRIGGER ledger_seals_no_truncate
    BEFORE TRUNCATE ON ledger_seals
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_seals_refuse_change();
-- ENABLE ALWAYS: the triggers fire even under session_replication_role = replica.
ALTER TABLE ledger_seals ENABLE ALWAYS TRIGGER ledger_seals_no_update_delete;
ALTER TABLE ledger_seals ENABLE ALWAYS TRIGGER ledger_seals_no_truncate;

-- +goose Down
DROP TABLE ledger_seals;
DROP FUNCTION ledger_seals_refuse_change();
