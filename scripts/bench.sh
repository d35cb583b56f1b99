#!/usr/bin/env bash
# bench.sh reproduces the figures in BENCHMARKS.md: `invledger bench
# --compare` at 50 and at 1,000 clients. Each run starts its own private
# redis-server and PostgreSQL in a temporary directory and runs, back to
# back, the raw Redis ceiling (redis-benchmark running the service's own
# deduct script), the Go library, the HTTP API and the SQL-first baseline.
#
#   scripts/bench.sh                  # both concurrencies, 10s per target
#   DURATION=30s scripts/bench.sh     # longer runs, steadier figures
#   CLIENTS="50" scripts/bench.sh     # one concurrency
#
# Tables go to the terminal and to $OUT/compare-<clients>.txt, JSON reports
# to $OUT/compare-<clients>.json (OUT defaults to .invledger/bench-results).
# Run it on an otherwise idle machine: the load generator, Redis, PostgreSQL
# and the service share its cores, and anything else running skews every
# figure (each report prints the load average it started with).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-.invledger/bench-results} # .invledger/ is git-ignored
DURATION=${DURATION:-10s}
CLIENTS=${CLIENTS:-"50 1000"}
DURABILITY=${DURABILITY:-strict}

scripts/install-deps.sh
mkdir -p "$OUT"

{
  echo "date:        $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpus:        $(nproc)"
  echo "kernel:      $(uname -sr)"
  echo "go:          $(go version)"
  echo "redis:       $(redis-server --version)"
  pg=$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | sort -V | tail -1 || true)
  echo "postgres:    $("${pg:-postgres}" --version)"
  echo "loadavg:     $(cat /proc/loadavg 2>/dev/null || uptime)"
} | tee "$OUT/machine.txt"

go build -o "$OUT/invledger" ./cmd/invledger

for clients in $CLIENTS; do
  echo
  echo "== invledger bench --compare --concurrency $clients --duration $DURATION --durability $DURABILITY"
  "$OUT/invledger" bench --compare --concurrency "$clients" --duration "$DURATION" --durability "$DURABILITY" \
    --json-out "$OUT/compare-$clients.json" | tee "$OUT/compare-$clients.txt"
done
