package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/tools/internal/bench"
)

// TestBenchmarksTableIsMakeBenchs: the table committed in BENCHMARKS.md is
// one that make bench wrote, stamped with a commit and a date, and not a
// hand-edited one in another shape.
func TestBenchmarksTableIsMakeBenchs(t *testing.T) {
	doc, err := os.ReadFile("../../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := parseTable(string(doc))
	if err != nil {
		t.Fatalf("BENCHMARKS.md: the table between %s and %s: %v (run make bench)", beginMarker, endMarker, err)
	}
	if tab.Date.Before(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("BENCHMARKS.md's table is dated %s, before make bench existed", tab.Date.Format(time.DateOnly))
	}
}

func fixtureReport(clients int) bench.CompareReport {
	caught, after := true, 0.25
	res := func(target string, perS, p99 float64) bench.Report {
		return bench.Report{Target: target, Clients: clients, SuccessPath: &bench.PhaseReport{Throughput: perS, P99: p99}}
	}
	lib := res("lib", 12345.6, 15.25)
	lib.LedgerEqualsRedis, lib.LedgerEqualsRedisAfter = &caught, &after
	return bench.CompareReport{Clients: clients, CPUs: 2, LoadAverage: "3.10",
		Results: []bench.Report{res("raw", 16640, 6.3), res("seed-like", 20000, 5), lib, res("http", 5877, 24), res("pg-direct", 110, 14500)},
		Ratios: map[string]float64{"lib/raw": 0.742, "lib/seed-like": 0.617, "http/raw": 0.353, "http/seed-like": 0.29,
			"lib Redis CPU per purchase/seed-like": 0.85, "lib Redis CPU per refusal/seed-like sold out": 0.33,
			"lib/pg-direct": 112.2, "http/pg-direct": 53.4}}
}

// TestRenderedTableParsesBack: what render writes between the markers,
// parseTable reads back row for row.
func TestRenderedTableParsesBack(t *testing.T) {
	r := run{Commit: "0123abc", Date: time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC), Duration: "5s", Note: "A noisy machine.",
		Compares: []bench.CompareReport{fixtureReport(50), fixtureReport(1000)},
		Go:       goBench{Events: 100000, DrainOne: 23872.4, DrainMany: 29908, RawInsert: 99700}}
	table, err := render(r)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := replaceTable([]byte("# Benchmarks\n\n"+beginMarker+"\nold figures\n"+endMarker+"\n\nMore.\n"), table)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "old figures") || !strings.HasSuffix(string(doc), endMarker+"\n\nMore.\n") {
		t.Fatalf("the markers' content was not replaced alone:\n%s", doc)
	}
	got, err := parseTable(string(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if got.Commit != "0123abc" || !got.Date.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("stamp read back as %s, %s", got.Commit, got.Date)
	}
	want := map[string]string{
		"lib: the Go library in-process, purchases/s (success path), 50 clients": "12,346, p99 15.25 ms",
		"lib / pg-direct, 1000 clients":                                          "112.20×",
		"ledger equals Redis after the lib sale, 50 clients":                     "0.25 s",
		"oversold, errors (every target of every run)":                           "0, 0",
		"projector drain, 1 SKU, events/s":                                       "23,872",
		"projector drain, 256 SKUs / raw batched insert":                         "0.30×",
	}
	for _, rw := range got.Rows {
		if v, ok := want[rw.measure]; ok && v != rw.value {
			t.Errorf("%s: %q, want %q", rw.measure, rw.value, v)
		}
		delete(want, rw.measure)
	}
	for m := range want {
		t.Errorf("no row %q", m)
	}
}

// TestParseTableRefusesAnEditedTable: a row left out or a figure typed in
// another form is not make bench's table.
func TestParseTableRefusesAnEditedTable(t *testing.T) {
	r := run{Commit: "0123abc", Date: time.Now(), Duration: "5s", Compares: []bench.CompareReport{fixtureReport(50)},
		Go: goBench{Events: 1000, DrainOne: 1, DrainMany: 1, RawInsert: 1}}
	table, err := render(r)
	if err != nil {
		t.Fatal(err)
	}
	doc := beginMarker + "\n" + table + endMarker
	for name, edit := range map[string]func(string) string{
		"a row removed": func(s string) string { return strings.Replace(s, "| http / raw, 50 clients | 0.35× |\n", "", 1) },
		"a figure retyped": func(s string) string {
			return strings.Replace(s, "| lib / raw, 50 clients | 0.74× |", "| lib / raw, 50 clients | about 0.7 |", 1)
		},
		"no commit": func(s string) string { return strings.Replace(s, "`0123abc`", "`HEAD`", 1) },
	} {
		edited := edit(doc)
		if edited == doc {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if _, err := parseTable(edited); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkProjectorDrain/skus=1-2         	       1	   5000 ns/op	       200.0 events/s
BenchmarkProjectorDrain/skus=1-2         	  100000	     40123 ns/op	     24923 events/s
BenchmarkProjectorDrain/skus=256-2       	  100000	     35000 ns/op	     28571.5 events/s
BenchmarkRawBatchedInsert-2              	  100000	     10000 ns/op	     99999 events/s
PASS
`
	g, err := parseGoBench(out)
	if err != nil {
		t.Fatal(err)
	}
	if g != (goBench{Events: 100000, DrainOne: 24923, DrainMany: 28571.5, RawInsert: 99999}) {
		t.Errorf("parsed %+v", g)
	}
	if _, err := parseGoBench("PASS\n"); err == nil {
		t.Error("an output without the benchmarks parsed")
	}
}
