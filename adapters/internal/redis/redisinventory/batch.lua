-- batch.lua: the purchase attempts (deducts and reserves) of one or more
-- SKUs of one partition, judged in one script call (the batcher in
-- batcher.go gathers them). Each SKU is a group: its attempts are judged in
-- the order given, and what is the same for all of them is paid once per
-- group, whatever their number: one HMGET of the SKU's live fields, one of
-- every request id and one of every buyer the group names; then one HSET
-- of the new receipts, one of the buyers and one of the SKU hash (stock,
-- seq, the open-hold counts and the new hold records). The node's run
-- (node.lua) and Redis's clock are read at most once per call; every event
-- of the call goes in one stream entry (or one entry each, below), and the
-- expiry entries of its reserves in one ZADD.
--
-- Each attempt does every check it did when it had a call of its own, in
-- the same order, against what the attempts before it in the call made: a
-- request id or a user that appears twice in one call is judged as if the
-- two had come in two calls. Groups do not share state, so their order in
-- the call is no order between their SKUs.
--
-- Failures: every read of the call happens before its first write. A read
-- that meets a key of the wrong type, or live fields that do not read
-- (sku_fault, skustate.lua), fails the attempts of its own SKU ({-20, key,
-- message}), and a buyer's count that does not read the attempts of that
-- buyer; a malformed receipt or hold record fails only the attempt that
-- read it ({-21, kind, message}). The Go side reads both as corrupt,
-- answers unavailable and has the SKU, or the record, rebuilt from the
-- ledger. The writes come after all judging: first the ZADD, then the
-- XADD, the two that write keys no read checked, so that an error of the
-- node (READONLY on a demoted master, OOM) or a stream or expiry set of the
-- wrong type fails the whole call with Redis's own error before anything
-- else is written (an expiry entry without its hold names no hold: the
-- sweeper drops it); the HSETs that follow write hashes the reads checked.
--
-- KEYS: per SKU its hash, buyers hash and requests hash, in the order of the groups in ARGV;
--   then the partition's expiry set and stream
-- ARGV[1] 'c' one stream entry per call (format v2: every field a column of lines joined by
--   "\n", line i belonging to event i), 'e' one entry per event (the 1.0.0 format)
-- then per SKU group: sku id, its number of attempts, and the attempts, each a kind and its fields:
--   d user qty request_id event_id traceparent           a deduct; traceparent is '' unless the
--                                                         purchase is in a sampled trace
--   r user qty request_id event_id ttl_ms hold_id order_id  a reserve; hold_id is derived from sku
--                                                         and request id, order_id may be ''
-- Reply: one answer per attempt, in ARGV's order. A deduct's:
--   {1, event_id, seq, remaining}  deducted now
--   {2, event_id, seq, remaining, released}  this request id already deducted: the original
--                                  receipt, and released 1 if its units were released since, else 0
-- a reserve's: hold_reply (hold.lua) with code 1 reserved now, 2 this request id already
-- reserved this hold (its state now); and for either:
--   {0, stock}                     sold out
--   {-1}                           not warmed
--   {-2}                           per-user limit reached (already purchased)
--   {-3}                           qty above the per-user limit: no user could ever buy it
--   {-4}                           recovering: the SKU is not verified under this node's run (node.lua)
--   {-5}                           sku closed
--   {-6}                           request id already used by another user, quantity or purchase
--   {-20, key, message}            the SKU's state does not read: key has the wrong type, or
--                                  holds a live field or a buyer's count that does not parse;
--                                  nothing written for it
--   {-21, kind, message}           a malformed record (kind receipt or hold): nothing written for it
local per_event = ARGV[1] == 'e'
if not per_event and ARGV[1] ~= 'c' then
  error('batch.lua: ARGV[1] is ' .. tostring(ARGV[1]) .. ', want c or e')
end
local expiry_key, stream_key = KEYS[#KEYS - 1], KEYS[#KEYS]
-- A call pays per table it builds, so the ones most calls never need are
-- made on first use: expiries (the ZADD of the call's reserves) at the
-- first reserve, and a group's writes at its first sale. writes holds the
-- HSETs of every group, in order, run after the ZADD and the XADD.
local answers, events, writes = {}, {}, {}
local expiries
local run, now
local at = 2
for g = 0, (#KEYS - 2) / 3 - 1 do
  local sku_key, buyers_key, requests_key = KEYS[3 * g + 1], KEYS[3 * g + 2], KEYS[3 * g + 3]
  local sku, first = ARGV[at], #answers + 1
  local attempts, requests, users = {}, {'HMGET', requests_key}, {'HMGET', buyers_key}
  local reserves = false
  at = at + 2
  for k = 1, tonumber(ARGV[at - 1]) do
    local a = {kind = ARGV[at], user = ARGV[at + 1], qty = tonumber(ARGV[at + 2]), request_id = ARGV[at + 3],
      event_id = ARGV[at + 4]}
    if a.kind == 'd' then
      a.tp, at = ARGV[at + 5], at + 6
    elseif a.kind == 'r' then
      a.ttl_ms, a.hold_id, a.order_id, at = tonumber(ARGV[at + 5]), ARGV[at + 6], ARGV[at + 7], at + 8
      reserves = true
    else
      error('batch.lua: attempt ' .. k .. ' of ' .. tostring(sku) .. ' has kind ' .. tostring(a.kind) .. ', want d or r')
    end
    attempts[k], requests[k + 2], users[k + 2] = a, a.request_id, a.user
  end

  -- The reads of the group. A key of the wrong type is the group's fault;
  -- any other error is the node's, raised for the whole call, before any
  -- write.
  local refused, failed, failed_key
  local stock, limit, status, seq, held, holds
  -- Only a group with a reserve reads the open-hold counts: each field
  -- read costs the call, and only a reserve writes them.
  local ok, live
  if reserves then
    ok, live = pcall(redis.call, 'HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds')
  else
    ok, live = pcall(redis.call, 'HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq')
  end
  if not ok then
    failed, failed_key = live, sku_key
  elseif not live[1] and not live[5] then
    refused = {-1}
  else
    -- The numbers the judging needs, read once; sku_fault only names
    -- what does not read, off the path of a sound SKU.
    stock, limit, status, seq = tonumber(live[1]), tonumber(live[2]), live[3], tonumber(live[5])
    held, holds = tonumber(live[6] or '0'), tonumber(live[7] or '0')
    run = run or node_run()
    if not (stock and limit and seq and held and holds) or (status ~= 'open' and status ~= 'closed') then
      refused = {-20, sku_key, 'malformed sku state: ' .. sku_fault(live)}
    elseif live[4] ~= run then
      refused = {-4}
    else
      ok, requests = pcall(redis.call, unpack(requests))
      if not ok then
        failed, failed_key = requests, requests_key
      else
        ok, users = pcall(redis.call, unpack(users))
        if not ok then
          failed, failed_key = users, buyers_key
        end
      end
    end
  end
  if failed then
    -- Redis 7 hands pcall a table with err; earlier versions a string.
    failed = type(failed) == 'table' and failed.err or tostring(failed)
    if not string.match(failed, '^WRONGTYPE') then
      error({err = failed})
    end
    refused = {-20, failed_key, failed}
  end

  if refused then
    for k = 1, #attempts do
      answers[first + k - 1] = refused
    end
  else
    -- receipts and counted start as Redis holds them and take what each
    -- attempt of the call makes, so that a later one reads it.
    local receipts, counted = {}, {}
    for k, a in ipairs(attempts) do
      if receipts[a.request_id] == nil then
        receipts[a.request_id] = requests[k] or false
      end
      if counted[a.user] == nil then
        counted[a.user] = tonumber(users[k] or '0') or false
      end
    end
    local new_receipts, buyers, new_holds
    for k, a in ipairs(attempts) do
      local answer
      local prior = receipts[a.request_id]
      if prior and a.kind == 'd' then
        -- A retry (go-redis retries commands, callers retry on timeouts)
        -- returns the original outcome, never buys a second time. A
        -- hold's request id (p.hold_id) is never a deduction's.
        local read, p = pcall(read_receipt, prior)
        if not read then
          answer = {-21, 'receipt', p}
        elseif p.user ~= a.user or p.qty ~= a.qty then
          answer = {-6}
        else
          answer = {2, p.event_id, p.seq, p.remaining, p.released and 1 or 0}
        end
      elseif prior then
        -- A retry of a reserve returns the original hold, in its state now.
        local raw = new_holds and new_holds[a.hold_id] or redis.call('HGET', sku_key, 'hold:' .. a.hold_id)
        local read, h = true, nil
        if raw then
          read, h = pcall(read_hold, raw)
        end
        if not read then
          answer = {-21, 'hold', h}
        elseif not h or h.user ~= a.user or h.qty ~= a.qty or h.order_id ~= a.order_id then
          answer = {-6}
        else
          now = now or now_ms()
          answer = hold_reply(2, h, now, requests_key)
        end
      elseif status == 'closed' then
        answer = {-5}
      elseif a.qty > limit then
        answer = {-3}
      elseif not counted[a.user] then
        answer = {-20, buyers_key, 'malformed sku state: the count of buyer ' .. a.user .. ' is "' .. users[k] .. '"'}
      elseif counted[a.user] + a.qty > limit then
        answer = {-2}
      elseif stock < a.qty then
        answer = {0, stock}
      else
        -- Judged: the attempt sells or holds, in this table until the
        -- writes at the end.
        seq, stock = seq + 1, stock - a.qty
        if not new_receipts then
          new_receipts, buyers = {'HSET', requests_key}, {}
        end
        if not buyers[a.user] then
          buyers[a.user], buyers[#buyers + 1] = true, a.user
        end
        counted[a.user] = counted[a.user] + a.qty
        -- The event and the receipt share the text of each number: a
        -- number costs a conversion each time it is joined to a string.
        local seq_text, stock_text, qty_text = tostring(seq), tostring(stock), tostring(a.qty)
        local ev = {e = entry(a.event_id, a.kind == 'd' and 'deducted' or 'reserved', sku, seq_text, qty_text,
          stock_text), user = a.user, request_id = a.request_id, tp = a.tp}
        if a.kind == 'd' then
          receipts[a.request_id] = write_receipt(seq_text, stock_text, qty_text, a.event_id, a.user)
          answer = {1, a.event_id, seq, stock}
        else
          now = now or now_ms()
          local h = {status = 'held', expires = now + a.ttl_ms, seq = seq, remaining = stock, qty = a.qty,
            event_id = a.event_id, end_seq = 0, end_event_id = '', request_id = a.request_id, order_id = a.order_id,
            user = a.user}
          receipts[a.request_id] = 'H' .. a.hold_id
          new_holds = new_holds or {}
          new_holds[a.hold_id], held, holds = write_hold(h), held + a.qty, holds + 1
          new_holds[#new_holds + 1] = a.hold_id
          expiries = expiries or {'ZADD', expiry_key}
          expiries[#expiries + 1], expiries[#expiries + 2] = h.expires, sku .. ' ' .. a.hold_id
          ev.hold_id, ev.expires_at, ev.order_id = a.hold_id, string.format('%.0f', h.expires), a.order_id
          answer = hold_reply(1, h, now, requests_key)
        end
        new_receipts[#new_receipts + 1], new_receipts[#new_receipts + 2] = a.request_id, receipts[a.request_id]
        events[#events + 1] = ev
      end
      answers[first + k - 1] = answer
    end
    if new_receipts then
      local set = {'HSET', sku_key, 'stock', stock, 'seq', seq}
      if new_holds then
        set[7], set[8], set[9], set[10] = 'held', held, 'holds', holds
        for _, hold_id in ipairs(new_holds) do
          set[#set + 1], set[#set + 2] = 'hold:' .. hold_id, new_holds[hold_id]
        end
      end
      local counts = {'HSET', buyers_key}
      for _, user in ipairs(buyers) do
        counts[#counts + 1], counts[#counts + 2] = user, counted[user]
      end
      writes[#writes + 1], writes[#writes + 2], writes[#writes + 3] = new_receipts, counts, set
    end
  end
end
if at ~= #ARGV + 1 then
  error('batch.lua: ' .. #ARGV .. ' arguments, the groups name ' .. (at - 1))
end

-- The writes, the ones that can fail first (see the header).
if expiries then
  redis.call(unpack(expiries))
end
if per_event or #events == 1 then
  -- The 1.0.0 format, which an entry of one event is too: its fields in
  -- 1.0.0's order, tp only in a sampled trace, and a reserve's order_id
  -- even when it is empty.
  for _, ev in ipairs(events) do
    local tp = ev.tp ~= '' and ev.tp or nil
    if ev.hold_id then
      redis.call('XADD', stream_key, '*', 'e', ev.e, 'user', ev.user, 'request_id', ev.request_id,
        'hold_id', ev.hold_id, 'expires_at', ev.expires_at, 'order_id', ev.order_id)
    elseif tp then
      redis.call('XADD', stream_key, '*', 'e', ev.e, 'user', ev.user, 'request_id', ev.request_id, 'tp', tp)
    else
      redis.call('XADD', stream_key, '*', 'e', ev.e, 'user', ev.user, 'request_id', ev.request_id)
    end
  end
elseif #events > 0 then
  -- columns are the entry's fields after e, in the order the 1.0.0 entries
  -- had them; a column none of the call's events has is left out, and a
  -- call that holds a reserve has order_id even when every one is empty.
  local columns = {'user', 'request_id', 'tp', 'hold_id', 'expires_at', 'order_id'}
  local add, lines, reserved = {'XADD', stream_key, '*', 'e'}, {}, false
  for i, ev in ipairs(events) do
    lines[i], reserved = ev.e, reserved or ev.hold_id ~= nil
  end
  add[5] = table.concat(lines, '\n')
  for _, c in ipairs(columns) do
    local present = false
    for i, ev in ipairs(events) do
      local v = ev[c] or ''
      present, lines[i] = present or v ~= '', v
    end
    if present or (c == 'order_id' and reserved) then
      add[#add + 1], add[#add + 2] = c, table.concat(lines, '\n')
    end
  end
  redis.call(unpack(add))
end
for _, w in ipairs(writes) do
  redis.call(unpack(w))
end
return answers
