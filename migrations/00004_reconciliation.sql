-- +goose Up
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

-- +goose Down
DROP TABLE reconciliation_findings;
DROP TABLE reconciliation_runs;
