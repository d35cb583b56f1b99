-- +goose Up
-- adjustments: manual stock changes, which take effect only once a second
-- person approves them. A row's request is never rewritten: only its status
-- columns move, forward, as the trigger below enforces.
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
        OR (OLD.status = 'approved' AND NEW.status IN ('applied', 'failed'))) THEN
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

-- +goose Down
DROP TABLE adjustments;
DROP FUNCTION adjustments_guard();
