#!/usr/bin/env bash
# bench.sh (make bench) measures the figures of BENCHMARKS.md in one run
# and writes its table between the file's bench markers, stamped with the
# commit and the date, so the table is always one run's:
#
#   - `invledger-lab bench --compare` at 50 and at 1,000 clients: the raw Redis
#     ceiling (redis-benchmark running the service's own purchase script), the
#     seed-like script, the Go library, the HTTP API and the SQL-first
#     baseline, each run starting its own private redis-server and PostgreSQL;
#   - the projector's drain of a backlog (1 SKU and 256 SKUs) beside the raw
#     batched ledger insert (go test -bench ./projections);
#   - HTTP through a full serve: `invledger dev` (API, projector and
#     reconciler in one process, on its own private redis-server and
#     PostgreSQL) driven by Debian's `wrk -t2 -c50`, each request a new
#     buyer (scripts/wrk-deduct.lua), beside the seed-like script at 50
#     clients; the serve's own CPU per request from /proc.
#
# About 4 minutes on 2 cores. Knobs:
#
#   DURATION=10s make bench           # per compare target (default 5s)
#   CLIENTS="50" make bench           # one concurrency
#   BENCH_NOTE="..." make bench       # a sentence under the table
#   TABLE=0 scripts/bench.sh          # measure, leave BENCHMARKS.md alone
#   WRK=0 make bench                  # leave out the wrk run
#
# The reports stay in $OUT (default .invledger/bench-results): compare-N.txt
# and compare-N.json per concurrency, gobench.txt, machine.txt. Run it on
# an otherwise idle machine: the load generator, Redis, PostgreSQL and the
# service share its cores, and anything else running skews every figure
# (the table gives the load average the first run started with).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-.invledger/bench-results} # .invledger/ is git-ignored
DURATION=${DURATION:-5s}
CLIENTS=${CLIENTS:-"50 1000"}
EVENTS=${EVENTS:-100000}
TABLE=${TABLE:-1}
BENCH_NOTE=${BENCH_NOTE:-}
WRK=${WRK:-1}

scripts/install-deps.sh
# wrk drives the HTTP run; make test does not need it, so it is installed
# here rather than by install-deps.sh.
if [ "$WRK" != 0 ] && ! command -v wrk >/dev/null 2>&1; then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "bench.sh: installing wrk from Debian's packages" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # absolute: the tools module is built and run from tools/
commit=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "bench.sh: the tree has uncommitted changes; the table would name $commit without them" >&2
  [ "$TABLE" = 0 ] || exit 1
fi

{
  echo "date:        $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit:      $commit"
  echo "cpus:        $(nproc)"
  echo "kernel:      $(uname -sr)"
  echo "go:          $(go version)"
  echo "redis:       $(redis-server --version)"
  pg=$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | sort -V | tail -1 || true)
  echo "postgres:    $("${pg:-postgres}" --version)"
  echo "loadavg:     $(cat /proc/loadavg 2>/dev/null || uptime)"
} | tee "$OUT/machine.txt"

go -C tools build -o "$OUT/invledger-lab" ./cmd/invledger-lab

reports=()
# A compare exits non-zero on any error of any target; SQL first timing out
# at 1,000 clients is one. Its report is still written, and the table shows
# the errors, so the run goes on and exits non-zero at the end.
failed=()
for clients in $CLIENTS; do
  echo
  echo "== invledger-lab bench --compare --concurrency $clients --duration $DURATION"
  if ! "$OUT/invledger-lab" bench --compare --concurrency "$clients" --duration "$DURATION" --durability strict \
    --json-out "$OUT/compare-$clients.json" | tee "$OUT/compare-$clients.txt"; then
    failed+=("$clients")
  fi
  reports+=("$OUT/compare-$clients.json")
done

echo
echo "== go test -bench 'ProjectorDrain|RawBatchedInsert' -benchtime ${EVENTS}x ./projections"
go test -count=1 -run '^$' -bench 'ProjectorDrain|RawBatchedInsert' -benchtime "${EVENTS}x" ./projections | tee "$OUT/gobench.txt"

if [ "$WRK" != 0 ]; then
  echo
  echo "== wrk -t2 -c50 -d$DURATION through invledger dev (api, projector, reconciler), each request a new buyer"
  wrkdir=$(mktemp -d)
  "$OUT/invledger-lab" dev --dir "$wrkdir" --listen 127.0.0.1:0 --durability strict >"$OUT/wrk-serve.log" 2>&1 &
  devpid=$!
  trap 'kill "$devpid" 2>/dev/null || true; wait "$devpid" 2>/dev/null || true; rm -rf "$wrkdir"' EXIT
  for _ in $(seq 600); do [ -s "$wrkdir/env" ] && break; kill -0 "$devpid" || break; sleep 0.1; done
  [ -s "$wrkdir/env" ] || { echo "bench.sh: invledger dev did not start: see $OUT/wrk-serve.log" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$wrkdir/env"
  sku="wrk-$(date +%s)"
  curl -fsS -X PUT "$API/v1/skus/$sku" -H "Authorization: Bearer $OP" -H 'Content-Type: application/json' \
    -d '{"stock":1000000000,"per_user_limit":1}' >/dev/null
  curl -fsS -X POST "$API/v1/skus/$sku/warm" -H "Authorization: Bearer $OP" >/dev/null
  export GW
  RUNID=warm wrk -t2 -c50 -d2s -s scripts/wrk-deduct.lua "$API/v1/skus/$sku/deduct" >/dev/null
  # utime+stime of the serve process alone (Redis and PostgreSQL are
  # processes of their own), in clock ticks.
  cpu() { awk '{print $14 + $15}' "/proc/$devpid/stat"; }
  cpu0=$(cpu)
  RUNID=run wrk -t2 -c50 -d"$DURATION" --latency -s scripts/wrk-deduct.lua "$API/v1/skus/$sku/deduct" | tee "$OUT/wrk-50.txt"
  cpu1=$(cpu)
  kill "$devpid"
  wait "$devpid" || true
  trap - EXIT
  rm -rf "$wrkdir"
  python3 - "$OUT/wrk-50.txt" "$OUT/compare-50.json" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" <<'PY' | tee -a "$OUT/wrk-50.txt"
import json, re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
done = int(re.search(r"(\d+) requests in", text).group(1))
p99 = re.search(r"\s99%\s+([0-9.]+)(us|ms|s)", text)
p99ms = float(p99.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)]
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
cpu_us = int(sys.argv[3]) * 1e6 / int(sys.argv[4]) / max(done, 1)
print(f"http through a full serve, wrk -t2 -c50: {rps:.0f} purchases/s, p99 {p99ms:.2f} ms, serve CPU {cpu_us:.1f} µs per request")
try:
    seed = next(r for r in json.load(open(sys.argv[2]))["results"] if r["target"] == "seed-like")
    ratio = rps / seed["success_path"]["throughput_per_s"]
    print(f"  / seed-like at 50 clients: {ratio:.2f}x (goal >= 0.45), p99 goal <= 10 ms: "
          + ("met" if ratio >= 0.45 and p99ms <= 10 else "MISSED"))
except (OSError, StopIteration, KeyError):
    print("  no seed-like run at 50 clients to compare with (CLIENTS has no 50)")
if bad:
    sys.exit(f"bench.sh: wrk saw {bad.group(1)} answers other than 2xx")
PY
fi

if [ "$TABLE" != 0 ]; then
  go -C tools run ./benchtable -file "$PWD/BENCHMARKS.md" -commit "$commit" -duration "$DURATION" \
    -gobench "$OUT/gobench.txt" -note "$BENCH_NOTE" "${reports[@]}"
  echo
  echo "BENCHMARKS.md: the table between <!-- bench:begin --> and <!-- bench:end --> is this run's"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "bench.sh: the compare at ${failed[*]} clients reported errors (see $OUT/compare-N.txt); the table shows them" >&2
  exit 1
fi
