#!/usr/bin/env bash
# bench-export-lag.sh: how long after a sale's last purchase its last event
# is on JetStream. A 100,000-unit sale of one SKU at 1,000 clients
# (invledger-lab bench --target lib) runs beside `invledger dev` (Redis,
# PostgreSQL and a serve that projects) and a serve of its own running the
# NATS export, against a private nats-server with monitoring on.
#
#   scripts/bench-export-lag.sh [NATS_SERVER_BIN]
#
# Needs invledger and invledger-lab on PATH (make install), psql, curl and
# python3. Ports 14333, 18222, 18091 and 18092 of 127.0.0.1 must be free.
# Prints the sale's figures, the projection's delay (recorded_at -
# occurred_at), the last event's lag on JetStream, and the p99 bucket of
# invledger_export_delay_seconds. Data goes to a temporary directory,
# removed at the end.
set -euo pipefail
nats_bin=${1:-nats-server}
dir=$(mktemp -d)
chmod 755 "$dir" # as root, PostgreSQL runs as postgres, which must reach its data
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

"$nats_bin" -js -a 127.0.0.1 -p 14333 -m 18222 -sd "$dir/js" >"$dir/nats.log" 2>&1 & pids+=($!)
invledger dev --dir "$dir/dev" --listen 127.0.0.1:18091 >"$dir/dev.log" 2>&1 & pids+=($!)
for _ in $(seq 1 240); do [ -f "$dir/dev/env" ] && curl -fsS http://127.0.0.1:18091/readyz >/dev/null 2>&1 && break; sleep 0.5; done
# shellcheck disable=SC1091
source "$dir/dev/env"
INVLEDGER_LOG_LEVEL=warn invledger serve --components export --listen 127.0.0.1:18092 \
  --export-nats-url nats://127.0.0.1:14333 >"$dir/export.log" 2>&1 & pids+=($!)
sleep 3

echo "sale: 100,000 units at 1,000 clients..."
invledger-lab bench --target lib --projector=false --concurrency 1000 --stock 100000 --requests 130000 \
  --log-level error >"$dir/bench.txt" 2>&1
grep -E "throughput|ledger equals" "$dir/bench.txt"

jsz() { curl -fsS "http://127.0.0.1:18222/jsz?streams=true"; }
ledger=0 stream=-1
for _ in $(seq 1 120); do
  ledger=$(psql "$INVLEDGER_DATABASE_URL" -Atc "SELECT count(*) FROM ledger_entries")
  stream=$(jsz | python3 -c 'import sys, json; d = json.load(sys.stdin); print(sum(s["state"]["messages"] for a in d.get("account_details", []) for s in a.get("stream_detail", [])))')
  [ "$ledger" = "$stream" ] && break
  sleep 0.5
done
echo "ledger events $ledger, on JetStream $stream"
psql "$INVLEDGER_DATABASE_URL" -Atc "SELECT 'projection delay p50 ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM recorded_at - occurred_at))::numeric, 3) || ' s, p99 ' || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM recorded_at - occurred_at))::numeric, 3) || ' s' FROM ledger_entries WHERE type = 'deducted'"
last_buy=$(psql "$INVLEDGER_DATABASE_URL" -Atc "SELECT extract(epoch FROM max(occurred_at)) FROM ledger_entries")
last_js=$(jsz | python3 -c '
import sys, json, datetime
d = json.load(sys.stdin)
ts = [s["state"]["last_ts"] for a in d.get("account_details", []) for s in a.get("stream_detail", [])][0]
whole, frac = ts.rstrip("Z").split(".")
t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()
print(t + float("0." + frac))')
python3 -c "print('last event on JetStream %.2f s after the last purchase' % ($last_js - $last_buy))"
curl -fsS http://127.0.0.1:18092/metrics | grep -E '^invledger_export_delay_seconds_bucket\{broker="nats"' | python3 -c '
import sys, re
b = [(float("inf") if m.group(1) == "+Inf" else float(m.group(1)), float(m.group(2)))
     for m in (re.search(r"le=\"([^\"]+)\"\} (\S+)", l) for l in sys.stdin) if m]
total = b[-1][1]
within = next(le for le, c in b if c >= 0.99 * total)
one = next(c for le, c in b if le == 1)
print("export delay p99 <= %s s; %d of %d events within 1 s" % (within, one, total))'
