-- +goose Up
-- Keyed seals. A seal is now either release 1.0.0's unkeyed sha256 link or
-- an hmac-sha256 link under a secret kept outside PostgreSQL, named by
-- key_id so keys rotate. No existing row changes: the new column is
-- nullable without a default (no rewrite), and the new checks are added NOT
-- VALID and validated after, so the scan does not block the sealer.
ALTER TABLE ledger_seals ADD COLUMN key_id text;
ALTER TABLE ledger_seals DROP CONSTRAINT ledger_seals_algorithm_check;
ALTER TABLE ledger_seals ADD CONSTRAINT ledger_seals_algorithm_check CHECK (
    CASE algorithm
        WHEN 'sha256' THEN key_id IS NULL
        WHEN 'hmac-sha256' THEN key_id IS NOT NULL
        ELSE false
    END) NOT VALID;
ALTER TABLE ledger_seals VALIDATE CONSTRAINT ledger_seals_algorithm_check;

-- ledger_checkpoints are the sealer's keyed statements of chain heads,
-- numbered n from 1 with no gap, each linked to the previous one's mac:
-- "these SKUs' chains reached these seals" (ledger_checkpoint_heads, the
-- heads that moved since the previous checkpoint). The first one, written
-- when serve first runs with a seal key, vouches for the unkeyed chains of
-- release 1.0.0; later ones make a chain that lost its tail visible.
-- Append-only like the seals.
-- +goose StatementBegin
CREATE FUNCTION ledger_checkpoints_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd
CREATE TABLE ledger_checkpoints (
    n          bigint PRIMARY KEY CHECK (n > 0),
    prev_mac   text NOT NULL,
    algorithm  text NOT NULL CHECK (algorithm = 'hmac-sha256'),
    key_id     text NOT NULL,
    mac        text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE TABLE ledger_checkpoint_heads (
    sku  text NOT NULL,
    n    bigint NOT NULL REFERENCES ledger_checkpoints (n),
    seq  bigint NOT NULL CHECK (seq > 0),
    hash text NOT NULL,
    PRIMARY KEY (sku, n)
);
CREATE INDEX ledger_checkpoint_heads_n_idx ON ledger_checkpoint_heads (n);
CREATE TRIGGER ledger_checkpoints_no_update_delete
    BEFORE UPDATE OR DELETE ON ledger_checkpoints
    FOR EACH ROW EXECUTE FUNCTION ledger_checkpoints_refuse_change();
CREATE TRIGGER ledger_checkpoints_no_truncate
    BEFORE TRUNCATE ON ledger_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_checkpoints_refuse_change();
ALTER TABLE ledger_checkpoints ENABLE ALWAYS TRIGGER ledger_checkpoints_no_update_delete;
ALTER TABLE ledger_checkpoints ENABLE ALWAYS TRIGGER ledger_checkpoints_no_truncate;
CREATE TRIGGER ledger_checkpoint_heads_no_update_delete
    BEFORE UPDATE OR DELETE ON ledger_checkpoint_heads
    FOR EACH ROW EXECUTE FUNCTION ledger_checkpoints_refuse_change();
CREATE TRIGGER ledger_checkpoint_heads_no_truncate
    BEFORE TRUNCATE ON ledger_checkpoint_heads
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_checkpoints_refuse_change();
ALTER TABLE ledger_checkpoint_heads ENABLE ALWAYS TRIGGER ledger_checkpoint_heads_no_update_delete;
ALTER TABLE ledger_checkpoint_heads ENABLE ALWAYS TRIGGER ledger_checkpoint_heads_no_truncate;

-- Once the ledger is keyed (it holds a checkpoint), no unkeyed seal may be
-- appended: a sealer without the key, or a serve of release 1.0.0 still
-- running during a rolling upgrade, is refused and retries, rather than
-- extend a keyed chain with links anyone could forge.
-- +goose StatementBegin
CREATE FUNCTION ledger_seals_refuse_unkeyed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.algorithm = 'sha256' AND EXISTS (SELECT 1 FROM ledger_checkpoints) THEN
        RAISE EXCEPTION 'ledger_seals: the ledger is keyed, an unkeyed seal of sku % seq % is refused: seal with a key (--seal-keys)', NEW.sku, NEW.seq
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER ledger_seals_keyed_only
    BEFORE INSERT ON ledger_seals
    FOR EACH ROW EXECUTE FUNCTION ledger_seals_refuse_unkeyed();
ALTER TABLE ledger_seals ENABLE ALWAYS TRIGGER ledger_seals_keyed_only;

-- +goose Down
-- Fails once a keyed seal exists: the old check refuses such rows, and
-- going back to unkeyed seals would drop the ledger's keyed protection.
DROP TRIGGER ledger_seals_keyed_only ON ledger_seals;
DROP FUNCTION ledger_seals_refuse_unkeyed();
DROP TABLE ledger_checkpoint_heads;
DROP TABLE ledger_checkpoints;
DROP FUNCTION ledger_checkpoints_refuse_change();
ALTER TABLE ledger_seals DROP CONSTRAINT ledger_seals_algorithm_check;
ALTER TABLE ledger_seals ADD CONSTRAINT ledger_seals_algorithm_check CHECK (algorithm = 'sha256');
ALTER TABLE ledger_seals DROP COLUMN key_id;
