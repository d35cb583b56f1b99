-- entry.lua: prepended to every script that appends an event (see
-- scripts.go). A stream entry carries only what the projector cannot
-- compute: field e packs the event id, type, sku, seq, qty and the balance
-- after, space-separated (none of them can hold a space); user, request_id,
-- actor and reason, which may hold any printable character, are fields of
-- their own, and so is tp, the W3C traceparent of a purchase made in a
-- sampled trace (batch.lua). The event's time is the entry's stream id, its delta follows
-- from type and qty, and the tamper-evident chain is sealed in the ledger.
-- redisinventory.ParseEntry reads it. Every event is an entry of its own,
-- also when batch.lua judges many attempts in one call, so each reader of
-- the stream (the projector, the reconciler's tail read, tail, dead-letter
-- replay, the epoch's entry lookup, restore) reads one event per entry, as
-- it did before batching; one entry per call would cost Redis less
-- (docs/benchmarks/2026-12-02-batched-purchases.md) but change the format.
local function entry(event_id, type, sku, seq, qty, balance)
  return event_id .. ' ' .. type .. ' ' .. sku .. ' ' .. seq .. ' ' .. qty .. ' ' .. balance
end
