-- +goose Up
-- ledger_entries is the truth: one row per stream event, never changed.
CREATE TABLE ledger_entries (
    event_id      uuid PRIMARY KEY,
    sku           text NOT NULL,
    seq           bigint NOT NULL CHECK (seq > 0),
    type          text NOT NULL CHECK (type IN ('stocked', 'deducted', 'released', 'adjusted')),
    delta         bigint NOT NULL,
    qty           bigint NOT NULL,
    balance_after bigint NOT NULL,
    user_id       text,
    request_id    text,
    actor         text,
    reason        text,
    occurred_at   timestamptz NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    stream_id     text NOT NULL,
    CONSTRAINT ledger_entries_sku_seq_key UNIQUE (sku, seq)
);
CREATE INDEX ledger_entries_user_idx ON ledger_entries (user_id, occurred_at) WHERE user_id IS NOT NULL;
CREATE INDEX ledger_entries_sku_time_idx ON ledger_entries (sku, occurred_at);

-- +goose StatementBegin
CREATE FUNCTION ledger_entries_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER ledger_entries_no_update_delete
    BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_refuse_change();
CREATE TRIGGER ledger_entries_no_truncate
    BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_refuse_change();
-- ENABLE ALWAYS: the triggers fire even under session_replication_role = replica.
ALTER TABLE ledger_entries ENABLE ALWAYS TRIGGER ledger_entries_no_update_delete;
ALTER TABLE ledger_entries ENABLE ALWAYS TRIGGER ledger_entries_no_truncate;

-- balances is a projection of ledger_entries and can always be recomputed from it.
CREATE TABLE balances (
    sku        text PRIMARY KEY,
    balance    bigint NOT NULL,
    last_seq   bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- dead_letters keeps every stream entry that could not be projected, so
-- nothing is dropped silently.
CREATE TABLE dead_letters (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text NOT NULL,
    stream_id   text NOT NULL,
    fields      jsonb NOT NULL,
    error       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dead_letters_stream_entry_key UNIQUE (stream, stream_id)
);

-- +goose Down
DROP TABLE dead_letters;
DROP TABLE balances;
DROP TABLE ledger_entries;
DROP FUNCTION ledger_entries_refuse_change();
