-- +goose Up
-- closed_at records when a sale was closed, so that a SKU restored into
-- Redis from the ledger comes back closed. It is set once.
ALTER TABLE skus ADD COLUMN closed_at timestamptz;

-- buyer_archives and buyer_archive_entries hold the buyers of closed sales
-- after archive-buyers deleted them from Redis, so that the buyers of
-- finished sales do not grow Redis without bound. One archive per SKU,
-- written once, taken at seq: the buyers are exactly what the ledger folds
-- to at that seq.
CREATE TABLE buyer_archives (
    sku          text PRIMARY KEY REFERENCES skus (sku),
    seq          bigint NOT NULL CHECK (seq > 0),
    buyers_count bigint NOT NULL CHECK (buyers_count >= 0),
    units        bigint NOT NULL CHECK (units >= 0),
    archived_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE buyer_archive_entries (
    sku     text NOT NULL REFERENCES buyer_archives (sku),
    user_id text NOT NULL,
    qty     bigint NOT NULL CHECK (qty > 0),
    PRIMARY KEY (sku, user_id)
);
CREATE INDEX buyer_archive_entries_user_idx ON buyer_archive_entries (user_id);

-- +goose StatementBegin
CREATE FUNCTION buyer_archives_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

-- An archive is the audit record of who held what once Redis forgot it.
CREATE TRIGGER buyer_archives_no_update_delete
    BEFORE UPDATE OR DELETE ON buyer_archives
    FOR EACH ROW EXECUTE FUNCTION buyer_archives_refuse_change();
CREATE TRIGGER buyer_archive_entries_no_update_delete
    BEFORE UPDATE OR DELETE ON buyer_archive_entries
    FOR EACH ROW EXECUTE FUNCTION buyer_archives_refuse_change();
ALTER TABLE buyer_archives ENABLE ALWAYS TRIGGER buyer_archives_no_update_delete;
ALTER TABLE buyer_archive_entries ENABLE ALWAYS TRIGGER buyer_archive_entries_no_update_delete;

-- +goose Down
DROP TABLE buyer_archive_entries;
DROP TABLE buyer_archives;
DROP FUNCTION buyer_archives_refuse_change();
ALTER TABLE skus DROP COLUMN closed_at;
