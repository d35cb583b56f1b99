-- entry.lua: prepended to every script that appends an event (see
-- scripts.go). A stream entry carries only what the projector cannot
-- compute: field e packs the event id, type, sku, seq, qty and the balance
-- after, space-separated (none of them can hold a space); user, request_id,
-- actor and reason, which may hold any printable character, are fields of
-- their own, and so is tp, the W3C traceparent of a purchase made in a
-- sampled trace (batch.lua). The event's time is the entry's stream id, its delta follows
-- from type and qty, and the tamper-evident chain is sealed in the ledger.
-- redisinventory.ParseEntry reads it. batch.lua puts every event of a call
-- in one entry (format v2, docs/storage.md): field e and every other field
-- present then hold one line per event, joined by "\n"; an entry of one
-- event is exactly this format. The other scripts write one event per entry.
local function entry(event_id, type, sku, seq, qty, balance)
  return event_id .. ' ' .. type .. ' ' .. sku .. ' ' .. seq .. ' ' .. qty .. ' ' .. balance
end
