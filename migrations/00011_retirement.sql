-- +goose Up
-- Retirement removes a finished sale from Redis entirely; the ledger then
-- answers for it. retired_at and retired_seq are set when it is retired and
-- cleared when restore-redis brings it back, which sets reopened_at: the
-- automatic retirement waits for its delay again from that moment, so a
-- SKU reopened for late releases is not retired under the operator's feet.
ALTER TABLE skus
    ADD COLUMN retired_at  timestamptz,
    ADD COLUMN retired_seq bigint CHECK (retired_seq > 0),
    ADD COLUMN reopened_at timestamptz,
    ADD CONSTRAINT skus_retired_seq_with_time CHECK ((retired_at IS NULL) = (retired_seq IS NULL));

-- A reopened SKU can be archived again at a later seq: the archive keeps
-- every version, append-only, one per (sku, seq), the latest being the
-- SKU's current archive.
ALTER TABLE buyer_archive_entries DROP CONSTRAINT buyer_archive_entries_sku_fkey;
ALTER TABLE buyer_archive_entries DROP CONSTRAINT buyer_archive_entries_pkey;
ALTER TABLE buyer_archives DROP CONSTRAINT buyer_archives_pkey;
ALTER TABLE buyer_archives ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version > 0);
ALTER TABLE buyer_archives ALTER COLUMN version DROP DEFAULT;
ALTER TABLE buyer_archives ADD PRIMARY KEY (sku, version);
ALTER TABLE buyer_archives ADD CONSTRAINT buyer_archives_sku_seq_key UNIQUE (sku, seq);
ALTER TABLE buyer_archive_entries ADD COLUMN version integer NOT NULL DEFAULT 1;
ALTER TABLE buyer_archive_entries ALTER COLUMN version DROP DEFAULT;
ALTER TABLE buyer_archive_entries ADD PRIMARY KEY (sku, version, user_id);
ALTER TABLE buyer_archive_entries ADD CONSTRAINT buyer_archive_entries_archive_fkey
    FOREIGN KEY (sku, version) REFERENCES buyer_archives (sku, version);

ALTER TABLE operations DROP CONSTRAINT operations_action_check;
ALTER TABLE operations ADD CONSTRAINT operations_action_check
    CHECK (action IN ('create', 'warm', 'close', 'archive', 'restore', 'repair', 'rebuild', 'retire'));

-- +goose Down
-- Down keeps only what the older schema can hold: it fails while a SKU has
-- two archive versions or a retire operation, rather than drop history.
ALTER TABLE operations DROP CONSTRAINT operations_action_check;
ALTER TABLE operations ADD CONSTRAINT operations_action_check
    CHECK (action IN ('create', 'warm', 'close', 'archive', 'restore', 'repair', 'rebuild'));

ALTER TABLE buyer_archive_entries DROP CONSTRAINT buyer_archive_entries_archive_fkey;
ALTER TABLE buyer_archive_entries DROP CONSTRAINT buyer_archive_entries_pkey;
ALTER TABLE buyer_archive_entries DROP COLUMN version;
ALTER TABLE buyer_archive_entries ADD PRIMARY KEY (sku, user_id);
ALTER TABLE buyer_archives DROP CONSTRAINT buyer_archives_pkey;
ALTER TABLE buyer_archives DROP CONSTRAINT buyer_archives_sku_seq_key;
ALTER TABLE buyer_archives DROP COLUMN version;
ALTER TABLE buyer_archives ADD PRIMARY KEY (sku);
ALTER TABLE buyer_archive_entries ADD CONSTRAINT buyer_archive_entries_sku_fkey
    FOREIGN KEY (sku) REFERENCES buyer_archives (sku);

ALTER TABLE skus
    DROP CONSTRAINT skus_retired_seq_with_time,
    DROP COLUMN reopened_at,
    DROP COLUMN retired_seq,
    DROP COLUMN retired_at;
