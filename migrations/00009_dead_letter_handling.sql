-- +goose Up
-- A dead letter is open until an operator replays it into the ledger or
-- resolves it with a note; handled_by names who (an API token's name or
-- cli:<os user>). Every action, also a replay that failed, is kept in
-- dead_letter_actions, append-only.
ALTER TABLE dead_letters
    ADD COLUMN status     text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'replayed', 'resolved')),
    ADD COLUMN handled_by text,
    ADD COLUMN handled_at timestamptz,
    ADD COLUMN note       text;

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

-- +goose Down
DROP TABLE dead_letter_actions;
ALTER TABLE dead_letters DROP COLUMN note, DROP COLUMN handled_at, DROP COLUMN handled_by, DROP COLUMN status;
