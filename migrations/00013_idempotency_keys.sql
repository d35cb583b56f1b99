-- +goose Up
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

-- +goose Down
DROP TABLE idempotency_keys;
