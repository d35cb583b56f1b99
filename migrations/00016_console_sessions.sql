-- +goose Up
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
