-- batch.lua: the purchase attempts of one batch on one SKU, deducts and
-- reserves, each judged alone and in the order given, in one script call
-- (the Batcher in batcher.go gathers them). What is the same for every
-- attempt is paid once per call: the call itself, the node fence and the
-- SKU's live fields (purchase.lua's live_sku), Redis's clock, and the write
-- of the SKU hash (stock, seq, the open-hold counts and the new hold
-- records), which the attempts update in the table live as they go. Each
-- attempt still does every check of its own before its own first write,
-- and reads what the attempts before it wrote: a request id or a user that
-- appears twice in one batch is judged as if the two had come in two calls.
--
-- Redis does not roll back a script that fails, so nothing in an attempt may
-- raise once an earlier attempt has written: each attempt runs under pcall,
-- and its first write is the one that can fail (ZADD or XADD on a key of
-- the wrong type; the hashes were read by its checks). An attempt that
-- raises is answered {-20, message} and has written nothing, and the others
-- go on. A receipt or hold record that does not parse raises that way
-- (read_receipt, read_hold): the Go side reads its message as a corrupt
-- record, answers unavailable and has the record rebuilt from the ledger. A Redis error met before the call's first write (READONLY on a
-- demoted master, OOM) is the whole call's: it is raised again, so the
-- caller sees Redis's own error, and nothing was written. Each attempt's
-- event is its own stream entry (entry.lua).
--
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition expiry set,
-- KEYS[5] partition stream
-- ARGV[1] sku id, then the attempts, each a kind and its fields:
--   d user qty request_id event_id traceparent           a deduct; traceparent is '' unless the
--                                                         purchase is in a sampled trace
--   r user qty request_id event_id ttl_ms hold_id order_id  a reserve; hold_id is derived from sku
--                                                         and request id, order_id may be ''
-- Reply: one answer per attempt, in order. A deduct's:
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
--   {-20, message}                 the attempt raised an error (a malformed receipt or hold
--                                  record, a key of the wrong type) and wrote nothing
local sku_key, buyers_key, requests_key, expiry_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local sku = ARGV[1]

-- fields is how many values follow each attempt's kind.
local fields = {d = 5, r = 7}
local starts = {}
local i = 2
while i <= #ARGV do
  local n = fields[ARGV[i]]
  if not n then
    error('batch.lua: attempt ' .. (#starts + 1) .. ' has kind ' .. ARGV[i] .. ', want d or r')
  end
  starts[#starts + 1] = i
  i = i + n + 1
end
if i ~= #ARGV + 1 then
  error('batch.lua: the last attempt has ' .. (#ARGV - starts[#starts]) .. ' fields')
end

local answers = {}
local live, refused = live_sku(sku_key)
if refused then
  for k = 1, #starts do
    answers[k] = refused
  end
  return answers
end
-- live: stock, limit, status, fence, seq, held, holds (purchase.lua). The
-- attempts move stock, seq and the hold counts here; the hash is written
-- once, at the end.
live[1], live[5], live[6], live[7] = tonumber(live[1]), tonumber(live[5]), tonumber(live[6]) or 0, tonumber(live[7]) or 0
local first_seq = live[5]
-- new_holds are the records of the holds this call reserved, by hold id:
-- written with the SKU hash, read by a replay in the same call.
local new_holds, reserved = {}, false
-- wrote turns true with the call's first write.
local wrote = false
local now
local function clock()
  if not now then
    now = now_ms()
  end
  return now
end

local function deduct(user, qty, request_id, event_id, tp)
  -- A retry (go-redis retries commands, callers retry on timeouts) must
  -- return the original outcome, never buy a second time.
  local prior = redis.call('HGET', requests_key, request_id)
  if prior then
    local p = read_receipt(prior)
    -- A hold's request id (p.hold_id) is never a deduction's.
    if p.user ~= user or p.qty ~= qty then
      return {-6}
    end
    local released = 0
    if p.released then
      released = 1
    end
    return {2, p.event_id, p.seq, p.remaining, released}
  end
  local counted, stock, refusal = allowance(live, buyers_key, user, qty)
  if refusal then
    return refusal
  end
  -- All checks done; writes follow, the one that can fail first.
  local remaining, seq = stock - qty, live[5] + 1
  local add = {'XADD', stream_key, '*', 'e', entry(event_id, 'deducted', sku, seq, qty, remaining),
    'user', user, 'request_id', request_id}
  if tp ~= '' then
    add[#add + 1], add[#add + 2] = 'tp', tp
  end
  redis.call(unpack(add))
  wrote = true
  redis.call('HSET', buyers_key, user, counted + qty)
  redis.call('HSET', requests_key, request_id, write_receipt(seq, remaining, qty, event_id, user))
  live[1], live[5] = remaining, seq
  return {1, event_id, seq, remaining}
end

local function reserve(user, qty, request_id, event_id, ttl_ms, hold_id, order_id)
  -- A retry returns the original hold, in the state it is in now.
  if redis.call('HEXISTS', requests_key, request_id) == 1 then
    local raw = new_holds[hold_id] or redis.call('HGET', sku_key, 'hold:' .. hold_id)
    if not raw then
      return {-6}
    end
    local h = read_hold(raw)
    if h.user ~= user or h.qty ~= qty or h.order_id ~= order_id then
      return {-6}
    end
    return hold_reply(2, h, clock(), requests_key)
  end
  local counted, stock, refusal = allowance(live, buyers_key, user, qty)
  if refusal then
    return refusal
  end
  -- All checks done; writes follow, the ones that can fail first. An
  -- expiry entry whose XADD then failed names no hold: the sweeper drops it.
  -- The SKU hash counts its open holds and their units, which
  -- reconciliation compares with the ledger.
  local t = clock()
  local h = {status = 'held', expires = t + ttl_ms, seq = live[5] + 1, remaining = stock - qty, qty = qty,
    event_id = event_id, end_seq = 0, end_event_id = '', request_id = request_id, order_id = order_id, user = user}
  redis.call('ZADD', expiry_key, h.expires, sku .. ' ' .. hold_id)
  wrote = true
  redis.call('XADD', stream_key, '*', 'e', entry(event_id, 'reserved', sku, h.seq, qty, h.remaining),
    'user', user, 'request_id', request_id, 'hold_id', hold_id, 'expires_at', string.format('%.0f', h.expires),
    'order_id', order_id)
  redis.call('HSET', buyers_key, user, counted + qty)
  redis.call('HSET', requests_key, request_id, 'H' .. hold_id)
  new_holds[hold_id], reserved = write_hold(h), true
  live[1], live[5], live[6], live[7] = h.remaining, h.seq, live[6] + qty, live[7] + 1
  return hold_reply(1, h, t, requests_key)
end

local function attempt(at)
  local user, qty, request_id, event_id = ARGV[at + 1], tonumber(ARGV[at + 2]), ARGV[at + 3], ARGV[at + 4]
  if ARGV[at] == 'd' then
    return deduct(user, qty, request_id, event_id, ARGV[at + 5])
  end
  return reserve(user, qty, request_id, event_id, tonumber(ARGV[at + 5]), ARGV[at + 6], ARGV[at + 7])
end

-- redis_error returns the text of an error Redis raised in a redis.call
-- (a table with err, or under pcall in Redis 7.0 a string starting with its
-- code: READONLY, OOM, WRONGTYPE ...), or nil for the script's own error(),
-- whose text starts with its position (user_script:12: ...).
local function redis_error(e)
  if type(e) == 'table' then
    return e.err
  end
  if string.match(tostring(e), '^%u+ ') then
    return e
  end
end

for k, at in ipairs(starts) do
  local ok, answer = pcall(attempt, at)
  if not ok then
    local raised = redis_error(answer)
    if raised and not wrote then
      error({err = raised})
    end
    answer = {-20, raised or tostring(answer)}
  end
  answers[k] = answer
end

if live[5] ~= first_seq then
  local set = {'HSET', sku_key, 'stock', live[1], 'seq', live[5]}
  if reserved then
    set[#set + 1], set[#set + 2], set[#set + 3], set[#set + 4] = 'held', live[6], 'holds', live[7]
    for hold_id, record in pairs(new_holds) do
      set[#set + 1], set[#set + 2] = 'hold:' .. hold_id, record
    end
  end
  redis.call(unpack(set))
end
return answers
