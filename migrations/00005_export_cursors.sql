-- +goose Up
-- export_cursors is the broker export's durable position per broker and
-- SKU: every ledger event of sku up to seq was confirmed by the broker.
-- The export resumes here after any restart, and moves a cursor only after
-- the broker confirmed the publish, so a kill at worst publishes again
-- what the broker already holds (which JetStream then refuses by its
-- order check and de-duplication).
CREATE TABLE export_cursors (
    broker     text NOT NULL CHECK (broker IN ('nats', 'amqp')),
    sku        text NOT NULL,
    seq        bigint NOT NULL CHECK (seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (broker, sku)
);

-- +goose Down
DROP TABLE export_cursors;
