-- +goose Up
-- An entry of several events (one batch.lua call) sends each malformed
-- event to dead_letters on its own, so several rows may share one stream
-- entry: event is the position in its entry of the event a row holds, 0
-- for a row that holds a whole entry (one of one event, as every row 1.0.0
-- wrote, or one that cannot be split into events). The new key is wider
-- than the old one, so every row meets it.
ALTER TABLE dead_letters ADD COLUMN event integer NOT NULL DEFAULT 0 CHECK (event >= 0);
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_stream_entry_key;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_stream_entry_key UNIQUE (stream, stream_id, event);

-- +goose Down
-- Fails once two events of one entry are dead letters: the old key refuses them.
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_stream_entry_key;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_stream_entry_key UNIQUE (stream, stream_id);
ALTER TABLE dead_letters DROP COLUMN event;
