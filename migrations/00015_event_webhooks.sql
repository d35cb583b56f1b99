-- +goose Up
-- Closing a SKU appends a closed event (delta 0, actor = who closed it).
-- The type list also names the hold events (reserved, confirmed, cancelled,
-- expired), so that this migration keeps them whichever order the two
-- changes of the type list were written in.
ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_type_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_type_check CHECK (type IN (
    'stocked', 'deducted', 'released', 'adjusted', 'closed',
    'reserved', 'confirmed', 'cancelled', 'expired'));

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

-- +goose Down
DROP TABLE webhook_cursors;
DROP TABLE webhook_subscriptions;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_type_check;
-- NOT VALID: closed events written meanwhile stay, as the ledger is append-only.
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_type_check CHECK (type IN (
    'stocked', 'deducted', 'released', 'adjusted',
    'reserved', 'confirmed', 'cancelled', 'expired')) NOT VALID;
