// Command benchtable writes the current figures of BENCHMARKS.md: from one
// `make bench` run (the JSON reports of `invledger bench --compare` and the
// output of the Go benchmarks scripts/bench.sh runs) it renders one table,
// stamped with the commit and the date, and puts it between the markers
// <!-- bench:begin --> and <!-- bench:end --> of the file it is given, so
// the table in the file is always one run's, never hand-edited figures.
//
//	go run ./tools/benchtable -file BENCHMARKS.md -commit C \
//	    -gobench gobench.txt [-note TEXT] compare-50.json compare-1000.json
//
// The same package parses the table back (parseTable), and its test checks
// that the table committed in BENCHMARKS.md is in this format.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/invledger/invledger/tools/internal/bench"
)

const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
	tableHeader = "| measure | value |"
	tableRule   = "|---|---|"
)

// run is what one `make bench` measured.
type run struct {
	Commit   string
	Date     time.Time
	Duration string // per target of each compare run, as scripts/bench.sh passed it
	Note     string
	Compares []bench.CompareReport
	Go       goBench
}

// goBench holds the events/s of the Go benchmarks scripts/bench.sh runs.
type goBench struct {
	Events    int     // -benchtime of the runs, in events
	DrainOne  float64 // BenchmarkProjectorDrain/skus=1
	DrainMany float64 // BenchmarkProjectorDrain/skus=256
	RawInsert float64 // BenchmarkRawBatchedInsert
}

func main() {
	file := flag.String("file", "BENCHMARKS.md", "the file whose table is replaced")
	commit := flag.String("commit", "", "the commit measured (git rev-parse --short HEAD)")
	goOut := flag.String("gobench", "", "the output of the Go benchmarks (go test -bench)")
	duration := flag.String("duration", "", "the --duration of each compare run")
	note := flag.String("note", "", "a sentence printed under the table, e.g. about the machine's load")
	flag.Parse()
	if err := write(*file, *commit, *goOut, *duration, *note, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func write(file, commit, goOut, duration, note string, compares []string) error {
	r := run{Commit: commit, Date: time.Now().UTC(), Duration: duration, Note: note}
	if len(compares) == 0 {
		return errors.New("no compare report given")
	}
	for _, path := range compares {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var c bench.CompareReport
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		r.Compares = append(r.Compares, c)
	}
	out, err := os.ReadFile(goOut)
	if err != nil {
		return err
	}
	if r.Go, err = parseGoBench(string(out)); err != nil {
		return fmt.Errorf("%s: %w", goOut, err)
	}
	table, err := render(r)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	updated, err := replaceTable(doc, table)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, updated, 0o644)
}

// goBenchLine matches a result line of go test -bench that reports events/s.
var goBenchLine = regexp.MustCompile(`(?m)^Benchmark(ProjectorDrain/skus=(\d+)|RawBatchedInsert)(?:-\d+)?\s+(\d+)\s.*?\s([\d.]+) events/s`)

func parseGoBench(out string) (goBench, error) {
	var g goBench
	for _, m := range goBenchLine.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			return g, err
		}
		n, _ := strconv.Atoi(m[3])
		if n <= 1 { // the one-iteration probe go test runs first
			continue
		}
		g.Events = n
		switch m[2] {
		case "1":
			g.DrainOne = v
		case "256":
			g.DrainMany = v
		case "":
			g.RawInsert = v
		}
	}
	if g.DrainOne == 0 || g.DrainMany == 0 || g.RawInsert == 0 {
		return g, errors.New("missing BenchmarkProjectorDrain/skus=1, skus=256 or BenchmarkRawBatchedInsert")
	}
	return g, nil
}

// row is one line of the table.
type row struct{ measure, value string }

// targetRows are the compare targets the table shows, with how it names them.
var targetRows = []struct{ target, name string }{
	{"raw", "raw ceiling: the purchase script (batch.lua, one attempt a call) under redis-benchmark"},
	{"seed-like", "seed-like script under redis-benchmark"},
	{"lib", "lib: the Go library in-process"},
	{"http", "http: the HTTP API"},
	{"pg-direct", "pg-direct: SQL first, hot-row UPDATE"},
}

// ratioRows are the ratios of CompareReport.Ratios the table shows.
var ratioRows = []string{"lib/raw", "lib/seed-like", "http/raw", "http/seed-like", "lib Redis CPU per purchase/seed-like",
	"lib Redis CPU per refusal/seed-like sold out", "lib/pg-direct", "http/pg-direct"}

// measures returns the names of the table's rows, in order, for compare
// runs at clients: render writes exactly these, parseTable expects them.
func measures(clients []int) []string {
	var m []string
	for _, c := range clients {
		at := fmt.Sprintf(", %d clients", c)
		for _, t := range targetRows {
			m = append(m, t.name+", purchases/s (success path)"+at)
		}
		for _, r := range ratioRows {
			m = append(m, strings.ReplaceAll(r, "/", " / ")+at)
		}
		m = append(m, "lib: mean purchase batch"+at, "ledger equals Redis after the lib sale"+at)
	}
	return append(m,
		"oversold, errors (every target of every run)",
		"projector drain, 1 SKU, events/s",
		"projector drain, 256 SKUs, events/s",
		"raw batched insert (500 rows a transaction, 2 writers), events/s",
		"projector drain, 256 SKUs / raw batched insert",
	)
}

func render(r run) (string, error) {
	var rows []row
	var clients []int
	var oversold, errs int64
	for _, c := range r.Compares {
		clients = append(clients, c.Clients)
		at := fmt.Sprintf(", %d clients", c.Clients)
		for _, t := range targetRows {
			res := c.Result(t.target)
			if res == nil || res.SuccessPath == nil {
				return "", fmt.Errorf("the compare run at %d clients has no %s success path", c.Clients, t.target)
			}
			rows = append(rows, row{t.name + ", purchases/s (success path)" + at,
				fmt.Sprintf("%s, p99 %s ms", thousands(res.SuccessPath.Throughput), decimal(res.SuccessPath.P99))})
		}
		for _, name := range ratioRows {
			v, ok := c.Ratios[name]
			if !ok {
				return "", fmt.Errorf("the compare run at %d clients has no ratio %s", c.Clients, name)
			}
			rows = append(rows, row{strings.ReplaceAll(name, "/", " / ") + at, ratio(v)})
		}
		lib := c.Result("lib")
		rows = append(rows, row{"lib: mean purchase batch" + at, decimal(lib.MeanBatchSize) + " attempts a call"})
		if lib.LedgerEqualsRedisAfter == nil || lib.LedgerEqualsRedis == nil || !*lib.LedgerEqualsRedis {
			return "", fmt.Errorf("the compare run at %d clients: the ledger did not catch up with Redis", c.Clients)
		}
		rows = append(rows, row{"ledger equals Redis after the lib sale" + at, decimal(*lib.LedgerEqualsRedisAfter) + " s"})
		for _, res := range c.Results {
			oversold += res.Oversold
			errs += res.Errors
		}
	}
	rows = append(rows,
		row{"oversold, errors (every target of every run)", fmt.Sprintf("%d, %d", oversold, errs)},
		row{"projector drain, 1 SKU, events/s", thousands(r.Go.DrainOne)},
		row{"projector drain, 256 SKUs, events/s", thousands(r.Go.DrainMany)},
		row{"raw batched insert (500 rows a transaction, 2 writers), events/s", thousands(r.Go.RawInsert)},
		row{"projector drain, 256 SKUs / raw batched insert", ratio(r.Go.DrainMany / r.Go.RawInsert)},
	)
	c0 := r.Compares[0]
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by `make bench` at commit `%s` on %s: `invledger-lab bench --compare` at %s clients, %s a target; Go benchmarks of %s events. %d CPUs, load average %s before the first run.\n\n",
		r.Commit, r.Date.Format(time.DateOnly), joinInts(clients), r.Duration, thousands(float64(r.Go.Events)), c0.CPUs, c0.LoadAverage)
	b.WriteString(tableHeader + "\n" + tableRule + "\n")
	for _, rw := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", rw.measure, rw.value)
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "\n%s\n", r.Note)
	}
	return b.String(), nil
}

// replaceTable puts table between the markers of doc.
func replaceTable(doc []byte, table string) ([]byte, error) {
	before, rest, ok := bytes.Cut(doc, []byte(beginMarker))
	if !ok {
		return nil, fmt.Errorf("no %s", beginMarker)
	}
	_, after, ok := bytes.Cut(rest, []byte(endMarker))
	if !ok {
		return nil, fmt.Errorf("no %s after %s", endMarker, beginMarker)
	}
	var b bytes.Buffer
	b.Write(before)
	b.WriteString(beginMarker + "\n" + table + endMarker)
	b.Write(after)
	return b.Bytes(), nil
}

// stampLine is the first line of the table's block, as render writes it.
var stampLine = regexp.MustCompile("^Measured by `make bench` at commit `([0-9a-f]{7,40})` on (\\d{4}-\\d{2}-\\d{2}): `invledger(?:-lab)? bench --compare` at ([0-9, and]+) clients, ")

// valueCell is any value render writes: a count or rate (with a p99), a
// ratio, seconds, or the oversold and error counts.
var valueCell = regexp.MustCompile(`^(\d{1,3}(,\d{3})*(, p99 \d+\.\d+ ms)?|\d+\.\d+×|\d+\.\d+ s|\d+\.\d+ attempts a call|\d+, \d+)$`)

// table is what parseTable reads back from a file.
type table struct {
	Commit string
	Date   time.Time
	Rows   []row
}

// parseTable reads the table between the markers of doc and checks that
// it is in the format render writes: the stamp line, the header, and
// exactly the rows render writes for the clients the stamp names, each
// with a value of one of render's forms.
func parseTable(doc string) (table, error) {
	var t table
	_, rest, ok := strings.Cut(doc, beginMarker+"\n")
	if !ok {
		return t, fmt.Errorf("no %s on a line of its own", beginMarker)
	}
	block, _, ok := strings.Cut(rest, endMarker)
	if !ok {
		return t, fmt.Errorf("no %s", endMarker)
	}
	lines := strings.Split(block, "\n")
	m := stampLine.FindStringSubmatch(lines[0])
	if m == nil {
		return t, fmt.Errorf("the first line is not the stamp make bench writes: %q", lines[0])
	}
	t.Commit = m[1]
	var err error
	if t.Date, err = time.Parse(time.DateOnly, m[2]); err != nil {
		return t, err
	}
	var clients []int
	for _, f := range strings.FieldsFunc(m[3], func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "and" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return t, fmt.Errorf("clients %q: %w", m[3], err)
		}
		clients = append(clients, n)
	}
	if len(lines) < 4 || lines[1] != "" || lines[2] != tableHeader || lines[3] != tableRule {
		return t, fmt.Errorf("the stamp is not followed by a blank line, %q and %q", tableHeader, tableRule)
	}
	want := measures(clients)
	for i, line := range lines[4:] {
		if line == "" {
			break
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
		if len(cells) != 2 {
			return t, fmt.Errorf("row %d has %d cells: %q", i+1, len(cells), line)
		}
		if i >= len(want) || cells[0] != want[i] {
			return t, fmt.Errorf("row %d is %q, make bench writes %q there", i+1, cells[0], strings.Join(want[min(i, len(want)-1):], ", "))
		}
		if !valueCell.MatchString(cells[1]) {
			return t, fmt.Errorf("row %q: %q is not a value make bench writes", cells[0], cells[1])
		}
		t.Rows = append(t.Rows, row{cells[0], cells[1]})
	}
	if len(t.Rows) != len(want) {
		return t, fmt.Errorf("%d rows, make bench writes %d", len(t.Rows), len(want))
	}
	return t, nil
}

func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func decimal(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func ratio(v float64) string { return decimal(v) + "×" }

// joinInts writes 50, 1000 and 5000 as "50, 1000 and 5000".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
