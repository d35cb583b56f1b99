-- records.lua: prepended to every script that reads or writes a SKU's
-- receipts (receipt.lua) or its buyers' counts (see scripts.go). A SKU
-- keeps them in one of two layouts, which field layout of its hash names
-- (docs/storage.md):
--   absent: the layout of 1.0, three hashes: receipts in the requests
--     hash, one field per request id, and counts in the buyers hash, one
--     field per user;
--   'one-hash': both in the SKU hash, as fields r:<request_id> and
--     u:<user>, beside its live fields and hold records (hold.lua), with
--     fields receipts and buyers counting the r: and u: fields, which
--     HLEN can no longer tell apart. A call then reads all a SKU's records
--     with one HMGET and writes them with one HSET.
-- A SKU's layout is set when it is warmed or restored (warm.lua,
-- restore_begin.lua) and never changes while it lives, so a script reads
-- it before any record.
-- records_of returns where a SKU whose layout field reads layout keeps its
-- records: the receipts' key and field prefix, then the counts' key and
-- field prefix.
local function records_of(layout, sku_key, buyers_key, requests_key)
  if layout == 'one-hash' then
    return sku_key, 'r:', sku_key, 'u:'
  end
  return requests_key, '', buyers_key, ''
end

-- count_records moves a one-hash SKU's count of receipts or buyers (field
-- receipts or buyers) by delta, for the scripts that add or remove one
-- record at a time; batch.lua writes its counts with its one HSET.
local function count_records(layout, sku_key, field, delta)
  if layout == 'one-hash' then
    redis.call('HINCRBY', sku_key, field, delta)
  end
end

-- start_one_hash writes the fields a SKU of the one-hash layout starts
-- with beside its live fields: its layout, its counts of records at 0, and
-- pad, a value longer than hash-max-listpack-value (64 unless raised). A
-- hash with such a value is a hashtable from then on, and is loaded as one
-- after a restart. A small hash is otherwise a listpack, in which every
-- field a command names is found by scanning the fields before it: up to
-- hash-max-listpack-entries of them (512 on Redis 7.0), so a SKU's reads
-- and writes cost more with each of its first 250 or so purchases, and a
-- sale spread over many SKUs pays that on most of them
-- (docs/benchmarks/2026-12-05-sku-hash-encoding.md).
local function start_one_hash(sku_key)
  redis.call('HSET', sku_key, 'layout', 'one-hash', 'receipts', 0, 'buyers', 0, 'pad', string.rep('.', 128))
end
