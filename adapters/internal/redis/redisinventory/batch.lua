-- batch.lua: the purchase attempts (deducts and reserves) of one or more
-- SKUs of one partition, judged in one script call (the batcher in
-- batcher.go gathers them). Each SKU is a group: its attempts are judged in
-- the order given, and what is the same for all of them is paid once per
-- group, whatever their number. A one-hash SKU (records.lua) costs one
-- HMGET of its live fields, its counts of records and every receipt and
-- buyer's count the group names, and one HSET of all the group writes
-- (stock, seq, the new receipts and counts, the counts of records, the
-- open-hold counts and the new hold records). A SKU of the 1.0 layout
-- costs an HMGET and an HSET more of each of its requests and buyers
-- hashes. The node's run (node.lua) and Redis's clock are read at most
-- once per call; every event of the call goes in one stream entry (or one
-- entry each, below), and the expiry entries of its reserves in one ZADD.
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
-- KEYS: per SKU its hash, buyers hash and requests hash (the two read only in the 1.0 layout), in
--   the order of the groups in ARGV; then the partition's expiry set and stream
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
-- The library functions the call uses most, as locals: a global is a
-- table lookup at each use.
local argv, format, match, concat = ARGV, string.format, string.match, table.concat
local call, tonumber, ipairs, unpack = redis.call, tonumber, ipairs, unpack
local per_event = argv[1] == 'e'
if not per_event and argv[1] ~= 'c' then
  error('batch.lua: ARGV[1] is ' .. tostring(argv[1]) .. ', want c or e')
end
local expiry_key, stream_key = KEYS[#KEYS - 1], KEYS[#KEYS]

-- A call pays for every table, string and number conversion it makes
-- (docs/benchmarks/2026-12-04-one-hash-per-sku.md), so an attempt is not
-- copied into a table of its own: it is read where it sits in ARGV, at its
-- position (its kind; then user, qty, request_id, event_id and the kind's
-- fields).
-- The tables most calls never need are made on first use: expiries (the
-- ZADD of the call's reserves) at the first reserve, and a group's writes
-- at its first sale. writes holds the HSETs of every group, in order, run
-- after the ZADD and the XADD. The call's events are three columns: the
-- text of field e, the position of the attempt that made it, and a
-- reserve's deadline.
local answers, writes, event_e, event_at = {}, {}, {}, {}
local expiries, event_expires
local run, now

-- read_each reads, with one HMGET of key, the field at offset off of each
-- attempt at positions; a key of the wrong type comes back as pcall's
-- failure, for the caller to confine to its group.
local function read_each(key, positions, off)
  if #positions == 1 then
    return pcall(call, 'HMGET', key, argv[positions[1] + off])
  end
  local fields = {'HMGET', key}
  for k, p in ipairs(positions) do
    fields[k + 2] = argv[p + off]
  end
  return pcall(call, unpack(fields))
end

local at = 2
for g = 0, (#KEYS - 2) / 3 - 1 do
  local sku_key, buyers_key, requests_key = KEYS[3 * g + 1], KEYS[3 * g + 2], KEYS[3 * g + 3]
  local sku, first = argv[at], #answers + 1
  local positions, reserves = {}, false
  at = at + 2
  for k = 1, tonumber(argv[at - 1]) do
    positions[k] = at
    local kind = argv[at]
    if kind == 'd' then
      at = at + 6
    elseif kind == 'r' then
      at, reserves = at + 8, true
    else
      error('batch.lua: attempt ' .. k .. ' of ' .. tostring(sku) .. ' has kind ' .. tostring(kind) .. ', want d or r')
    end
  end

  -- The reads of the group. A key of the wrong type is the group's fault;
  -- any other error is the node's, raised for the whole call, before any
  -- write. One HMGET reads the live fields, the layout (records.lua), the
  -- counts of records a one-hash SKU keeps (absent in the 1.0 layout) and,
  -- for a one-hash SKU, every receipt and count the group names, each
  -- attempt's r: and u: after the live fields: a field more costs far less
  -- than a command more, so a sold-out refusal, which needs no count,
  -- reads them too. Only a group with a reserve reads the open-hold counts
  -- (held, holds), which only a reserve writes. Attempt k's receipt comes
  -- back at live[base - 1 + 2 * k] and its buyer's count after it, at
  -- live[base + 2 * k]; a SKU of the 1.0 layout reads its records from its
  -- two other hashes after and puts them there.
  local refused, failed, failed_key
  local stock, limit, status, seq, held, holds
  local layout, receipts_key, receipt_prefix, counts_key, count_prefix
  local fields = {'HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq', 'layout', 'receipts', 'buyers'}
  if reserves then
    fields[11], fields[12] = 'held', 'holds'
  end
  local base = #fields - 2
  for k, p in ipairs(positions) do
    fields[base + 1 + 2 * k], fields[base + 2 + 2 * k] = 'r:' .. argv[p + 3], 'u:' .. argv[p + 1]
  end
  local ok, live = pcall(call, unpack(fields))
  if not ok then
    failed, failed_key = live, sku_key
  elseif not live[1] and not live[5] then
    refused = {-1}
  else
    -- The numbers the judging needs, read once; sku_fault only names
    -- what does not read, off the path of a sound SKU.
    stock, limit, status, seq, layout = tonumber(live[1]), tonumber(live[2]), live[3], tonumber(live[5]), live[6]
    held, holds = tonumber(reserves and live[9] or '0'), tonumber(reserves and live[10] or '0')
    run = run or node_run()
    -- The counts of records are judged only when the SKU may sell, the one
    -- case that writes them, so that a sold-out refusal does not pay for it.
    if not (stock and limit and seq and held and holds) or (status ~= 'open' and status ~= 'closed') or
      (layout and (layout ~= 'one-hash' or status == 'open' and stock > 0 and
        not (match(live[7] or '', '^%d+$') and match(live[8] or '', '^%d+$')))) then
      local state = {live[1], live[2], live[3], live[4], live[5], reserves and live[9], reserves and live[10], layout,
        live[7], live[8]}
      refused = {-20, sku_key, 'malformed sku state: ' .. sku_fault(state)}
    elseif live[4] ~= run then
      refused = {-4}
    else
      receipts_key, receipt_prefix, counts_key, count_prefix = records_of(layout, sku_key, buyers_key, requests_key)
      if not layout then
        local requests, users
        ok, requests = read_each(requests_key, positions, 3)
        if not ok then
          failed, failed_key = requests, requests_key
        else
          ok, users = read_each(buyers_key, positions, 1)
          if not ok then
            failed, failed_key = users, buyers_key
          end
        end
        for k = 1, ok and #positions or 0 do
          live[base - 1 + 2 * k], live[base + 2 * k] = requests[k], users[k]
        end
      end
    end
  end
  if failed then
    -- Redis 7 hands pcall a table with err; earlier versions a string.
    failed = type(failed) == 'table' and failed.err or tostring(failed)
    if not match(failed, '^WRONGTYPE') then
      error({err = failed})
    end
    refused = {-20, failed_key, failed}
  end

  if refused then
    for k = 1, #positions do
      answers[first + k - 1] = refused
    end
  else
    -- receipts and counted hold, by request id and by user, what Redis
    -- holds, taken from the read of the first attempt that names it, and
    -- then what each attempt of the call makes, so that a later one reads
    -- it. added counts the buyers new to the SKU (no count read) who
    -- bought: one more each for a one-hash SKU's count of buyers.
    local receipts, counted, added = {}, {}, 0
    -- The group's last sale's seq and stock as text: the text each was
    -- joined into its event as, written to the SKU hash as it is.
    -- records are the field and value of each new receipt, buyers the
    -- users who bought, in order.
    local seq_text, stock_text
    local records, buyers, new_holds
    for k, p in ipairs(positions) do
      local kind, user, qty_text, request_id, event_id = argv[p], argv[p + 1], argv[p + 2], argv[p + 3], argv[p + 4]
      local qty = tonumber(qty_text)
      local answer
      local prior = receipts[request_id]
      if prior == nil then
        prior = live[base - 1 + 2 * k] or false
        receipts[request_id] = prior
      end
      if counted[user] == nil then
        counted[user] = tonumber(live[base + 2 * k] or '0') or false
      end
      if prior and kind == 'd' then
        -- A retry (go-redis retries commands, callers retry on timeouts)
        -- returns the original outcome, never buys a second time. A
        -- hold's request id (its hold id) is never a deduction's.
        local read, r = pcall(read_receipt, prior)
        if not read then
          answer = {-21, 'receipt', r}
        elseif r.user ~= user or r.qty ~= qty then
          answer = {-6}
        else
          answer = {2, r.event_id, r.seq, r.remaining, r.released and 1 or 0}
        end
      elseif prior then
        -- A retry of a reserve returns the original hold, in its state now.
        local hold_id = argv[p + 6]
        local raw = new_holds and new_holds[hold_id] or call('HGET', sku_key, 'hold:' .. hold_id)
        local read, h = true, nil
        if raw then
          read, h = pcall(read_hold, raw)
        end
        if not read then
          answer = {-21, 'hold', h}
        elseif not h or h.user ~= user or h.qty ~= qty or h.order_id ~= argv[p + 7] then
          answer = {-6}
        else
          now = now or now_ms()
          answer = hold_reply(2, h, now, receipts_key, receipt_prefix)
        end
      elseif status == 'closed' then
        answer = {-5}
      elseif qty > limit then
        answer = {-3}
      elseif not counted[user] then
        answer = {-20, counts_key, 'malformed sku state: the count of buyer ' .. user .. ' is "' .. live[base + 2 * k] .. '"'}
      elseif counted[user] + qty > limit then
        answer = {-2}
      elseif stock < qty then
        answer = {0, stock}
      else
        -- Judged: the attempt sells or holds, in these tables until the
        -- writes at the end. Numbers become text once each, by %d, which
        -- costs half of tostring's %.14g and writes the same digits for
        -- integers this size; the Go side sends qty as an integer's text.
        seq, stock = seq + 1, stock - qty
        seq_text, stock_text = format('%d', seq), format('%d', stock)
        if not records then
          records, buyers = layout and {} or {'HSET', requests_key}, {}
        end
        if not buyers[user] then
          buyers[user], buyers[#buyers + 1] = true, user
          if not live[base + 2 * k] then
            added = added + 1
          end
        end
        counted[user] = counted[user] + qty
        local e = #event_e + 1
        event_at[e] = p
        if kind == 'd' then
          event_e[e] = entry(event_id, 'deducted', sku, seq_text, qty_text, stock_text)
          receipts[request_id] = write_receipt(seq_text, stock_text, qty_text, event_id, user)
          answer = {1, event_id, seq, stock}
        else
          local hold_id = argv[p + 6]
          now = now or now_ms()
          local h = {status = 'held', expires = now + tonumber(argv[p + 5]), seq = seq, remaining = stock, qty = qty,
            event_id = event_id, end_seq = 0, end_event_id = '', request_id = request_id, order_id = argv[p + 7],
            user = user}
          event_e[e] = entry(event_id, 'reserved', sku, seq_text, qty_text, stock_text)
          receipts[request_id] = 'H' .. hold_id
          new_holds = new_holds or {}
          new_holds[hold_id], held, holds = write_hold(h), held + qty, holds + 1
          new_holds[#new_holds + 1] = hold_id
          expiries = expiries or {'ZADD', expiry_key}
          expiries[#expiries + 1], expiries[#expiries + 2] = h.expires, sku .. ' ' .. hold_id
          event_expires = event_expires or {}
          event_expires[e] = format('%.0f', h.expires)
          answer = hold_reply(1, h, now, receipts_key, receipt_prefix)
        end
        records[#records + 1], records[#records + 2] = receipt_prefix .. request_id, receipts[request_id]
      end
      answers[first + k - 1] = answer
    end
    if records then
      -- A one-hash SKU takes all of it in one HSET, the 1.0 layout in one
      -- HSET of each of its hashes; each sale made one receipt.
      local set = {'HSET', sku_key, 'stock', stock_text, 'seq', seq_text}
      if new_holds then
        set[7], set[8], set[9], set[10] = 'held', held, 'holds', holds
        for _, hold_id in ipairs(new_holds) do
          set[#set + 1], set[#set + 2] = 'hold:' .. hold_id, new_holds[hold_id]
        end
      end
      local counts = layout and set or {'HSET', buyers_key}
      for _, user in ipairs(buyers) do
        counts[#counts + 1], counts[#counts + 2] = count_prefix .. user, format('%d', counted[user])
      end
      if layout then
        set[#set + 1], set[#set + 2] = 'receipts', format('%d', tonumber(live[7]) + #records / 2)
        set[#set + 1], set[#set + 2] = 'buyers', format('%d', tonumber(live[8]) + added)
        for i = 1, #records do
          set[#set + 1] = records[i]
        end
        writes[#writes + 1] = set
      else
        writes[#writes + 1], writes[#writes + 2], writes[#writes + 3] = records, counts, set
      end
    end
  end
end
if at ~= #argv + 1 then
  error('batch.lua: ' .. #argv .. ' arguments, the groups name ' .. (at - 1))
end

-- The writes, the ones that can fail first (see the header).
if expiries then
  call(unpack(expiries))
end
if per_event or #event_e == 1 then
  -- The 1.0.0 format, which an entry of one event is too: its fields in
  -- 1.0.0's order, tp only in a sampled trace, and a reserve's order_id
  -- even when it is empty.
  for i, e in ipairs(event_e) do
    local p = event_at[i]
    if argv[p] == 'r' then
      call('XADD', stream_key, '*', 'e', e, 'user', argv[p + 1], 'request_id', argv[p + 3],
        'hold_id', argv[p + 6], 'expires_at', event_expires[i], 'order_id', argv[p + 7])
    elseif argv[p + 5] ~= '' then
      call('XADD', stream_key, '*', 'e', e, 'user', argv[p + 1], 'request_id', argv[p + 3], 'tp', argv[p + 5])
    else
      call('XADD', stream_key, '*', 'e', e, 'user', argv[p + 1], 'request_id', argv[p + 3])
    end
  end
elseif #event_e > 0 then
  -- The entry's fields after e, in the order the 1.0.0 entries had them:
  -- user and request_id; tp when some purchase of the call is in a sampled
  -- trace; hold_id, expires_at and order_id when some event is a reserve
  -- (order_id even when every one is empty). An event without a field has
  -- '' on its line. After its position p, an attempt holds user at p+1,
  -- request_id at p+3, a deduct's tp at p+5, a reserve's hold_id and
  -- order_id at p+6 and p+7. Columns most calls never have are made only
  -- when one is present.
  local users, requests, tps, traced = {}, {}, {}, false
  for i = 1, #event_e do
    local p = event_at[i]
    users[i], requests[i], tps[i] = argv[p + 1], argv[p + 3], argv[p] == 'd' and argv[p + 5] or ''
    traced = traced or tps[i] ~= ''
  end
  local add = {'XADD', stream_key, '*', 'e', concat(event_e, '\n'), 'user', concat(users, '\n'),
    'request_id', concat(requests, '\n')}
  if traced then
    add[10], add[11] = 'tp', concat(tps, '\n')
  end
  if event_expires then
    local hold_ids, expires_at, order_ids = {}, {}, {}
    for i = 1, #event_e do
      local p = event_at[i]
      if argv[p] == 'r' then
        hold_ids[i], expires_at[i], order_ids[i] = argv[p + 6], event_expires[i], argv[p + 7]
      else
        hold_ids[i], expires_at[i], order_ids[i] = '', '', ''
      end
    end
    add[#add + 1], add[#add + 2] = 'hold_id', concat(hold_ids, '\n')
    add[#add + 1], add[#add + 2] = 'expires_at', concat(expires_at, '\n')
    add[#add + 1], add[#add + 2] = 'order_id', concat(order_ids, '\n')
  end
  call(unpack(add))
end
for _, w in ipairs(writes) do
  call(unpack(w))
end
return answers
