-- +goose Up
-- Each event's link in its SKU's tamper-evident chain, as the Lua script
-- computed it: hash = sha1(prev_hash || canonical fields). `invledger audit
-- verify` recomputes the chains and names the first row that breaks.
ALTER TABLE ledger_entries
    ADD COLUMN prev_hash text NOT NULL DEFAULT '',
    ADD COLUMN hash      text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE ledger_entries DROP COLUMN hash, DROP COLUMN prev_hash;
