-- +goose Up
-- An approved adjustment that could not be applied (its SKU was not warmed,
-- say) may still be rejected by an approver: approved → rejected joins the
-- forward moves. Who rejected it replaces who approved it in decided_by.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION adjustments_guard() RETURNS trigger
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

-- operations is the audit trail of who changed a SKU's state outside a
-- purchase: create, warm, close, archive, restore, repair, rebuild. actor is
-- the HTTP principal, system:<component> or cli:<os user>. Append-only.
CREATE TABLE operations (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku    text NOT NULL,
    action text NOT NULL CHECK (action IN ('create', 'warm', 'close', 'archive', 'restore', 'repair', 'rebuild')),
    actor  text NOT NULL CHECK (actor <> ''),
    at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    detail text NOT NULL DEFAULT ''
);
CREATE INDEX operations_sku_idx ON operations (sku, id);

CREATE TRIGGER operations_no_update_delete
    BEFORE UPDATE OR DELETE ON operations
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_refuse_change();
ALTER TABLE operations ENABLE ALWAYS TRIGGER operations_no_update_delete;

-- +goose Down
DROP TABLE operations;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION adjustments_guard() RETURNS trigger
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
