-- skustate.lua: prepended to the scripts that read a SKU's live fields to
-- sell, hold, show, adjust or close it (batch.lua, state.lua, adjust.lua,
-- close.lua, and through purchase.lua release.lua and hold_end.lua; see
-- scripts.go), so that they agree on what a SKU whose state does not read
-- is.
-- sku_fault takes the live fields in the order every one of them reads
-- them, {stock, limit, status, fence, seq, held, holds}, and, from the
-- scripts that read records (records.lua), layout, receipts and buyers
-- after them; it names the first that does not read as the scripts write
-- it (stock, limit and seq numbers, status open or closed, held and holds
-- numbers when present, layout absent or one-hash, and in a one-hash SKU
-- its receipts and buyers counts, which HINCRBY moves, decimal integers),
-- or returns nil. A caller answers {-20, key, 'malformed sku state: ...'}
-- or raises that text: the Go side reads either as a corrupt SKU state
-- (codes.go, records.go), answers unavailable and has the SKU restored
-- from the ledger.
local function sku_fault(live)
  local bad
  if not tonumber(live[1]) then
    bad = 1
  elseif not tonumber(live[2]) then
    bad = 2
  elseif live[3] ~= 'open' and live[3] ~= 'closed' then
    bad = 3
  elseif not tonumber(live[5]) then
    bad = 5
  elseif live[6] and not tonumber(live[6]) then
    bad = 6
  elseif live[7] and not tonumber(live[7]) then
    bad = 7
  elseif live[8] and live[8] ~= 'one-hash' then
    bad = 8
  elseif live[8] and not string.match(live[9] or '', '^%d+$') then
    bad = 9
  elseif live[8] and not string.match(live[10] or '', '^%d+$') then
    bad = 10
  else
    return nil
  end
  local v = live[bad]
  return ({'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds', 'layout', 'receipts', 'buyers'})[bad] .. ' is ' ..
    (v and ('"' .. v .. '"') or 'missing')
end
