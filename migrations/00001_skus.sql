-- +goose Up
-- skus holds each sale's definition. stocked_event_id is set once, before the
-- stocked event is first appended, so a repeated warm reuses the same event id
-- and the stocked event enters the ledger once in the SKU's life.
CREATE TABLE skus (
    sku              text PRIMARY KEY CHECK (sku ~ '^[A-Za-z0-9._:-]{1,64}$'),
    initial_stock    bigint NOT NULL CHECK (initial_stock >= 0),
    per_user_limit   bigint NOT NULL CHECK (per_user_limit > 0),
    stocked_event_id uuid UNIQUE,
    created_at       timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE skus;
