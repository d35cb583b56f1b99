#!/usr/bin/env bash
# bench.sh (make bench) measures the figures of BENCHMARKS.md in one run
# and writes its table between the file's bench markers, stamped with the
# commit and the date, so the table is always one run's:
#
#   - `invledger bench --compare` at 50 and at 1,000 clients: the raw Redis
#     ceiling (redis-benchmark running the service's own purchase script), the
#     seed-like script, the Go library, the HTTP API and the SQL-first
#     baseline, each run starting its own private redis-server and PostgreSQL;
#   - the projector's drain of a backlog (1 SKU and 256 SKUs) beside the raw
#     batched ledger insert (go test -bench ./projections).
#
# About 4 minutes on 2 cores. Knobs:
#
#   DURATION=10s make bench           # per compare target (default 5s)
#   CLIENTS="50" make bench           # one concurrency
#   BENCH_NOTE="..." make bench       # a sentence under the table
#   TABLE=0 scripts/bench.sh          # measure, leave BENCHMARKS.md alone
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

scripts/install-deps.sh
mkdir -p "$OUT"
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

go build -o "$OUT/invledger" ./cmd/invledger

reports=()
for clients in $CLIENTS; do
  echo
  echo "== invledger bench --compare --concurrency $clients --duration $DURATION"
  "$OUT/invledger" bench --compare --concurrency "$clients" --duration "$DURATION" --durability strict \
    --json-out "$OUT/compare-$clients.json" | tee "$OUT/compare-$clients.txt"
  reports+=("$OUT/compare-$clients.json")
done

echo
echo "== go test -bench 'ProjectorDrain|RawBatchedInsert' -benchtime ${EVENTS}x ./projections"
go test -count=1 -run '^$' -bench 'ProjectorDrain|RawBatchedInsert' -benchtime "${EVENTS}x" ./projections | tee "$OUT/gobench.txt"

if [ "$TABLE" != 0 ]; then
  go run ./cmd/invledger/internal/benchtable -file BENCHMARKS.md -commit "$commit" -duration "$DURATION" \
    -gobench "$OUT/gobench.txt" -note "$BENCH_NOTE" "${reports[@]}"
  echo
  echo "BENCHMARKS.md: the table between <!-- bench:begin --> and <!-- bench:end --> is this run's"
fi
