-- chain.lua: prepended to every script that appends an event (see
-- inventory.go). chain_hash links an event into its SKU's tamper-evident
-- chain: sha1(prev_hash || canonical fields), with each field
-- length-prefixed. domain.EventHash computes the same in Go to verify the
-- ledger. fields: event_id, type, sku, seq, qty, delta, balance, user,
-- request_id, actor, reason, ts, all strings.
local function chain_hash(prev, fields)
  local parts = {prev, '\n'}
  for i = 1, 12 do
    local v = fields[i]
    parts[#parts + 1] = string.len(v) .. ':' .. v .. ';'
  end
  return redis.sha1hex(table.concat(parts))
end

local function int(n)
  return string.format('%d', n)
end
