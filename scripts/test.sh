#!/usr/bin/env bash
# test.sh is `make test`: vet, every test with the race detector against
# private redis-server and PostgreSQL processes the tests start themselves,
# a short run of every Go benchmark so none can rot, and a short run of
# every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-5s}
SECONDS=0
phase() { echo "== $* (at ${SECONDS}s)"; }

scripts/install-deps.sh

phase "go vet"
go vet ./...

phase "go test -race"
# go test runs as many packages at once as there are CPUs, starting them in
# the order given. The slowest packages, whose crash, outage and full-speed
# sale tests run serially, go first: started last, they would run on alone.
go test -race -count=1 -timeout 20m ./ledger/reconcile ./projections ./cmd/invledger ./ledger ./...

phase "Watermill's conformance suite for adapters/redisbatch, without -race"
# The suite turns its short mode off under -race and is built only without
# it (//go:build !race); its full, non-short run takes about 10s here.
go test -count=1 -run '^TestPubSub$' ./adapters/redisbatch/

phase "benchmarks (short, so they cannot rot)"
go test -run '^$' -bench . -benchtime 200x -timeout 10m ./...

phase "fuzz targets, ${FUZZTIME} each"
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
  pkg=$(dirname "$file")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
    echo "-- $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  done
done
echo "== all tests passed in ${SECONDS}s"
