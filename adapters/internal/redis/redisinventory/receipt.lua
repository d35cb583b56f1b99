-- receipt.lua: prepended to batch.lua, release.lua and the hold scripts
-- (see scripts.go).
-- A deduction's receipt in the requests hash is one string in a fixed field
-- order, no JSON:
--   seq:remaining:qty:event_id:user
-- and once its units are released, with the release's seq and event id in
-- front:
--   R<release_seq>:<release_event_id>:seq:remaining:qty:event_id:user
-- user comes last because it is the one field that may hold a colon.
-- A request id that reserved a hold, until the hold is confirmed, maps to
-- H<hold_id> (hold.lua), read as {hold_id = ...}; confirm replaces it with
-- the purchase receipt.
-- read_receipt raises 'malformed receipt in the requests hash: <raw>' for a
-- value that does not parse: the Go side reads that text as a corrupt record
-- (codes.go) and has it rebuilt from the ledger.
local function read_receipt(raw)
  if string.byte(raw, 1) == 72 then
    return {hold_id = string.sub(raw, 2)}
  end
  local p, rest = {}, raw
  if string.byte(raw, 1) == 82 then
    local rseq, revent, tail = string.match(raw, '^R(%d+):([^:]*):(.*)$')
    -- A value that only starts like a released receipt is malformed below.
    p.released, p.release_seq, p.release_event_id, rest = true, tonumber(rseq), revent, tail or ''
  end
  local seq, remaining, qty, event_id, user = string.match(rest, '^(%d+):(%-?%d+):(%d+):([^:]*):(.*)$')
  if not seq then
    error('malformed receipt in the requests hash: ' .. raw)
  end
  p.seq, p.remaining, p.qty, p.event_id, p.user = tonumber(seq), tonumber(remaining), tonumber(qty), event_id, user
  return p
end

local function write_receipt(seq, remaining, qty, event_id, user)
  return seq .. ':' .. remaining .. ':' .. qty .. ':' .. event_id .. ':' .. user
end
