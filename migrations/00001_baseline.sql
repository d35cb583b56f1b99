-- +goose Up
-- The schema of release 1. A later change is a new migration on top of this
-- one, never an edit of it.

-- The append-only tables refuse UPDATE, DELETE and TRUNCATE in the database
-- itself, so no code path (and no operator with the application's
-- credentials) can rewrite history. Their triggers are ENABLE ALWAYS: they
-- fire even under session_replication_role = replica.
-- +goose StatementBegin
CREATE FUNCTION ledger_entries_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ledger_seals_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_seals is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION buyer_archives_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

-- skus holds each sale's definition. stocked_event_id is set once, before the
-- stocked event is first appended, so a repeated warm reuses the same event id
-- and the stocked event enters the ledger once in the SKU's life. closed_at
-- records when the sale was closed, so that a SKU restored into Redis from
-- the ledger comes back closed; it is set once.
--
-- Retirement removes a finished sale from Redis entirely; the ledger then
-- answers for it. retired_at and retired_seq are set when it is retired and
-- cleared when restore-redis brings it back, which sets reopened_at: the
-- automatic retirement waits for its delay again from that moment, so a SKU
-- reopened for late releases is not retired under the operator's feet.
CREATE TABLE skus (
    sku              text PRIMARY KEY CHECK (sku ~ '^[A-Za-z0-9._:-]{1,64}$'),
    initial_stock    bigint NOT NULL CHECK (initial_stock >= 0),
    per_user_limit   bigint NOT NULL CHECK (per_user_limit > 0),
    stocked_event_id uuid UNIQUE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    closed_at        timestamptz,
    retired_at       timestamptz,
    retired_seq      bigint CHECK (retired_seq > 0),
    reopened_at      timestamptz,
    CONSTRAINT skus_retired_seq_with_time CHECK ((retired_at IS NULL) = (retired_seq IS NULL))
);

-- ledger_entries is the truth: one row per stream event, never changed.
-- Holds: a reserved event takes units out of available stock until a
-- confirmed (the units stay sold), cancelled or expired (they come back)
-- event ends the hold. Every hold event carries its hold_id, and its
-- order_id when the hold is a line of an order, so the ledger alone tells
-- what happened to a hold or an order; the reserved event carries the
-- deadline. A closed event (delta 0, actor = who closed it) ends a sale.
CREATE TABLE ledger_entries (
    event_id      uuid PRIMARY KEY,
    sku           text NOT NULL,
    seq           bigint NOT NULL CHECK (seq > 0),
    type          text NOT NULL CHECK (type IN (
                      'stocked', 'deducted', 'released', 'adjusted', 'closed',
                      'reserved', 'confirmed', 'cancelled', 'expired')),
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
    hold_id       uuid,
    order_id      text,
    expires_at    timestamptz,
    CONSTRAINT ledger_entries_sku_seq_key UNIQUE (sku, seq),
    CONSTRAINT ledger_entries_hold_check CHECK (
        (type IN ('reserved', 'confirmed', 'cancelled', 'expired')) = (hold_id IS NOT NULL)
        AND (type = 'reserved') = (expires_at IS NOT NULL))
);
CREATE INDEX ledger_entries_user_idx ON ledger_entries (user_id, occurred_at) WHERE user_id IS NOT NULL;
-- balance-at sums a SKU's deltas up to an instant. With delta in the index,
-- PostgreSQL answers it from the index alone (an index-only scan) instead of
-- fetching one table row per event.
CREATE INDEX ledger_entries_sku_time_delta_idx ON ledger_entries (sku, occurred_at) INCLUDE (delta);
CREATE INDEX ledger_entries_hold_idx ON ledger_entries (hold_id) WHERE hold_id IS NOT NULL;
CREATE INDEX ledger_entries_order_idx ON ledger_entries (order_id) WHERE order_id IS NOT NULL;

CREATE TRIGGER ledger_entries_no_update_delete
    BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_refuse_change();
CREATE TRIGGER ledger_entries_no_truncate
    BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_refuse_change();
ALTER TABLE ledger_entries ENABLE ALWAYS TRIGGER ledger_entries_no_update_delete;
ALTER TABLE ledger_entries ENABLE ALWAYS TRIGGER ledger_entries_no_truncate;

-- ledger_seals holds each SKU's tamper-evident chain, sealed in the ledger
-- off the purchase path: one link per ledger row, written in seq order as
-- rows become contiguous, never changed. hash = sha256(prev_hash || the
-- row's canonical fields). `invledger audit verify` recomputes the seals and
-- names the first row that breaks.
CREATE TABLE ledger_seals (
    sku       text NOT NULL,
    seq       bigint NOT NULL CHECK (seq > 0),
    prev_hash text NOT NULL,
    hash      text NOT NULL,
    algorithm text NOT NULL CHECK (algorithm = 'sha256'),
    sealed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (sku, seq)
);
CREATE TRIGGER ledger_seals_no_update_delete
    BEFORE UPDATE OR DELETE ON ledger_seals
    FOR EACH ROW EXECUTE FUNCTION ledger_seals_refuse_change();
CREATE TRIGGER ledger_seals_no_truncate
    BEFORE TRUNCATE ON ledger_seals
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_seals_refuse_change();
ALTER TABLE ledger_seals ENABLE ALWAYS TRIGGER ledger_seals_no_update_delete;
ALTER TABLE ledger_seals ENABLE ALWAYS TRIGGER ledger_seals_no_truncate;

-- balances is a projection of ledger_entries and can always be recomputed
-- from it: balance is available stock, held the units of open holds.
CREATE TABLE balances (
    sku        text PRIMARY KEY,
    balance    bigint NOT NULL,
    last_seq   bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    held       bigint NOT NULL DEFAULT 0
);

-- dead_letters keeps every stream entry that could not be projected, so
-- nothing is dropped silently. A dead letter is open until an operator
-- replays it into the ledger or resolves it with a note; handled_by names
-- who (an API token's name or cli:<os user>). Every action, also a replay
-- that failed, is kept in dead_letter_actions, append-only.
CREATE TABLE dead_letters (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text NOT NULL,
    stream_id   text NOT NULL,
    fields      jsonb NOT NULL,
    error       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'replayed', 'resolved')),
    handled_by  text,
    handled_at  timestamptz,
    note        text,
    CONSTRAINT dead_letters_stream_entry_key UNIQUE (stream, stream_id)
);

CREATE TABLE dead_letter_actions (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dead_letter_id bigint NOT NULL REFERENCES dead_letters (id),
    action         text NOT NULL CHECK (action IN ('replay', 'replay_failed', 'resolve')),
    actor          text NOT NULL CHECK (actor <> ''),
    at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    detail         text NOT NULL DEFAULT ''
);
CREATE INDEX dead_letter_actions_letter_idx ON dead_letter_actions (dead_letter_id, id);
CREATE TRIGGER dead_letter_actions_no_update_delete
    BEFORE UPDATE OR DELETE ON dead_letter_actions
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_refuse_change();
ALTER TABLE dead_letter_actions ENABLE ALWAYS TRIGGER dead_letter_actions_no_update_delete;

-- buyer_archives and buyer_archive_entries hold the buyers of closed sales
-- after archive-buyers deleted them from Redis, so that the buyers of
-- finished sales do not grow Redis without bound. An archive is taken at
-- seq: the buyers are exactly what the ledger folds to at that seq. A SKU
-- reopened by restore-redis can be archived again at a later seq: the
-- archive keeps every version, append-only, one per (sku, seq), the latest
-- being the SKU's current archive. An archive is the audit record of who
-- held what once Redis forgot it.
CREATE TABLE buyer_archives (
    sku          text NOT NULL REFERENCES skus (sku),
    seq          bigint NOT NULL CHECK (seq > 0),
    buyers_count bigint NOT NULL CHECK (buyers_count >= 0),
    units        bigint NOT NULL CHECK (units >= 0),
    archived_at  timestamptz NOT NULL DEFAULT now(),
    version      integer NOT NULL CHECK (version > 0),
    PRIMARY KEY (sku, version),
    CONSTRAINT buyer_archives_sku_seq_key UNIQUE (sku, seq)
);

CREATE TABLE buyer_archive_entries (
    sku     text NOT NULL,
    user_id text NOT NULL,
    qty     bigint NOT NULL CHECK (qty > 0),
    version integer NOT NULL,
    PRIMARY KEY (sku, version, user_id),
    CONSTRAINT buyer_archive_entries_archive_fkey FOREIGN KEY (sku, version) REFERENCES buyer_archives (sku, version)
);
CREATE INDEX buyer_archive_entries_user_idx ON buyer_archive_entries (user_id);

CREATE TRIGGER buyer_archives_no_update_delete
    BEFORE UPDATE OR DELETE ON buyer_archives
    FOR EACH ROW EXECUTE FUNCTION buyer_archives_refuse_change();
CREATE TRIGGER buyer_archive_entries_no_update_delete
    BEFORE UPDATE OR DELETE ON buyer_archive_entries
    FOR EACH ROW EXECUTE FUNCTION buyer_archives_refuse_change();
ALTER TABLE buyer_archives ENABLE ALWAYS TRIGGER buyer_archives_no_update_delete;
ALTER TABLE buyer_archive_entries ENABLE ALWAYS TRIGGER buyer_archive_entries_no_update_delete;

-- Every reconciliation run and each of its findings, with the figures before
-- and after repair, so drift is never only a log line.
CREATE TABLE reconciliation_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger     text NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    checked     integer NOT NULL,
    drifts      integer NOT NULL,
    repaired    integer NOT NULL,
    error       text
);
CREATE INDEX reconciliation_runs_started_idx ON reconciliation_runs (started_at DESC);

CREATE TABLE reconciliation_findings (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       bigint NOT NULL REFERENCES reconciliation_runs (id),
    sku          text NOT NULL,
    class        text NOT NULL,
    detail       text NOT NULL,
    before       jsonb NOT NULL,
    after        jsonb,
    repaired     boolean NOT NULL,
    repair_error text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reconciliation_findings_sku_idx ON reconciliation_findings (sku, created_at);
CREATE INDEX reconciliation_findings_run_idx ON reconciliation_findings (run_id);

-- adjustments: manual stock changes, which take effect only once a second
-- person approves them. A row's request is never rewritten: only its status
-- columns move, forward, as the trigger below enforces. An approved
-- adjustment that could not be applied (its SKU was not warmed, say) may
-- still be rejected by an approver; who rejected it replaces who approved it
-- in decided_by.
CREATE TABLE adjustments (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku                   text NOT NULL REFERENCES skus (sku),
    delta                 bigint NOT NULL CHECK (delta <> 0),
    reason                text NOT NULL CHECK (reason <> ''),
    requested_by          text NOT NULL,
    requested_at          timestamptz NOT NULL DEFAULT now(),
    status                text NOT NULL DEFAULT 'pending'
                          CHECK (status IN ('pending', 'approved', 'rejected', 'applied', 'failed')),
    decided_by            text,
    decided_at            timestamptz,
    event_id              uuid,
    seq                   bigint,
    result                text,
    reconciliation_run_id bigint REFERENCES reconciliation_runs (id)
);
CREATE INDEX adjustments_status_idx ON adjustments (status, requested_at);
CREATE INDEX adjustments_sku_idx ON adjustments (sku, requested_at);

-- +goose StatementBegin
CREATE FUNCTION adjustments_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'adjustments keep their history: DELETE refused' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.sku, NEW.delta, NEW.reason, NEW.requested_by, NEW.requested_at)
       IS DISTINCT FROM (OLD.sku, OLD.delta, OLD.reason, OLD.requested_by, OLD.requested_at) THEN
        RAISE EXCEPTION 'adjustment %: the request cannot be rewritten', OLD.id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
           (OLD.status = 'pending' AND NEW.status IN ('approved', 'rejected'))
        OR (OLD.status = 'approved' AND NEW.status IN ('applied', 'failed', 'rejected'))) THEN
        RAISE EXCEPTION 'adjustment %: status cannot move from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER adjustments_guard BEFORE UPDATE OR DELETE ON adjustments
    FOR EACH ROW EXECUTE FUNCTION adjustments_guard();
ALTER TABLE adjustments ENABLE ALWAYS TRIGGER adjustments_guard;

-- operations is the audit trail of who changed a SKU's state outside a
-- purchase: create, warm, close, archive, restore, repair, rebuild, retire.
-- actor is the HTTP principal, system:<component> or cli:<os user>.
-- Append-only.
CREATE TABLE operations (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku    text NOT NULL,
    action text NOT NULL CHECK (action IN ('create', 'warm', 'close', 'archive', 'restore', 'repair', 'rebuild', 'retire')),
    actor  text NOT NULL CHECK (actor <> ''),
    at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    detail text NOT NULL DEFAULT ''
);
CREATE INDEX operations_sku_idx ON operations (sku, id);
CREATE TRIGGER operations_no_update_delete
    BEFORE UPDATE OR DELETE ON operations
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_refuse_change();
ALTER TABLE operations ENABLE ALWAYS TRIGGER operations_no_update_delete;

-- The first answer to a write sent with an Idempotency-Key, per principal
-- and key, so that a retry gets it again instead of writing twice. status
-- is NULL while the first request runs. Rows are deleted after the
-- documented window (24 h by default: server.Config.IdempotencyWindow).
CREATE TABLE idempotency_keys (
    principal   text NOT NULL,
    key         text NOT NULL,
    fingerprint text NOT NULL,
    status      integer CHECK (status BETWEEN 200 AND 299),
    body        bytea,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

-- webhook_subscriptions are the business-event webhooks an operator manages
-- (POST /v1/webhooks). secret signs deliveries the Standard Webhooks way;
-- after a rotation previous_secret signs them too until
-- previous_expires_at, so a receiver can switch without losing one.
CREATE TABLE webhook_subscriptions (
    id                  text PRIMARY KEY,
    url                 text NOT NULL,
    event_types         text[] NOT NULL CHECK (cardinality(event_types) > 0),
    secret              text NOT NULL,
    previous_secret     text,
    previous_expires_at timestamptz,
    created_by          text NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- webhook_cursors is each subscription's durable position per SKU: every
-- ledger event of sku up to seq has been delivered (or skipped as not
-- subscribed). Delivery resumes here after any restart, so Redis holds
-- nothing for a receiver that is down.
CREATE TABLE webhook_cursors (
    subscription_id text NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    sku             text NOT NULL,
    seq             bigint NOT NULL CHECK (seq >= 0),
    PRIMARY KEY (subscription_id, sku)
);

-- Console sign-ins. The session itself travels in a signed and encrypted
-- cookie, so any serve process sharing the console key can read it; this
-- table is what those processes share to refuse a cookie after sign-out.
-- Rows are deleted once past the console's longest session lifetime.
CREATE TABLE console_sessions (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    role       text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at   timestamptz
);
CREATE INDEX console_sessions_started_at_idx ON console_sessions (started_at);

-- +goose Down
DROP TABLE console_sessions;
DROP TABLE webhook_cursors;
DROP TABLE webhook_subscriptions;
DROP TABLE idempotency_keys;
DROP TABLE operations;
DROP TABLE adjustments;
DROP FUNCTION adjustments_guard();
DROP TABLE reconciliation_findings;
DROP TABLE reconciliation_runs;
DROP TABLE buyer_archive_entries;
DROP TABLE buyer_archives;
DROP TABLE dead_letter_actions;
DROP TABLE dead_letters;
DROP TABLE balances;
DROP TABLE ledger_seals;
DROP TABLE ledger_entries;
DROP TABLE skus;
DROP FUNCTION buyer_archives_refuse_change();
DROP FUNCTION ledger_seals_refuse_change();
DROP FUNCTION ledger_entries_refuse_change();
