package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/invledger/invledger/domain"
)

var updateSpec = flag.Bool("update", false, "rewrite docs/openapi.yaml's printable-text patterns from domain.Unprintable")

// specPattern is what the spec's pattern at one place must mean: its
// template, when it is printable text, and the server's own check of the
// value; a nil accepts says the server parses more forms than the pattern
// promises, and the engines are held to Go's regexp.
type specPattern struct {
	template string // "" for a pattern written by hand; {U} stands for domain.Unprintable's characters
	accepts  func(string) bool
	samples  []string // valid values the corpus varies
	// also are the pointers of the patterns of the schema's allOf, when
	// it says the rest of the rule so; whole is then the server's check
	// of a value, which the patterns together must mean.
	also  []string
	whole func(string) bool
}

// noError reports whether a constructor accepted its input.
func noError[T any](_ T, err error) bool { return err == nil }

// specPatterns are docs/openapi.yaml's patterns, by JSON pointer: every
// pattern the description has must be here.
var specPatterns = map[string]specPattern{
	"/components/schemas/SKUID/pattern": {
		accepts: func(s string) bool { return noError(domain.NewSKUID(s)) },
		samples: []string{"sku-1", "a.b:c_d"},
	},
	"/components/schemas/UserID/allOf/0/pattern": {
		// Printable, in the one pattern that spells {U} (a generator
		// expands each class); the schema's own pattern refuses a space
		// at either end, only dots and a single /, without {U}, and
		// neither says NFC.
		template: `^[^{U}]+$`,
		accepts:  func(s string) bool { return noError(domain.NewRequestID(s)) },
		samples:  []string{"u-42", "john smith", "./x"},
	},
	"/components/schemas/UserID/pattern": {
		samples: []string{"u-42", "john smith", "./x", ".", "..", "/", "./", " u", "u "},
		also:    []string{"/components/schemas/UserID/allOf/0/pattern"},
		whole:   func(s string) bool { return noError(domain.NewUserID(s)) },
	},
	"/components/schemas/RequestID/pattern": {
		template: `^[^{U}]+$`,
		accepts:  func(s string) bool { return noError(domain.NewRequestID(s)) },
		samples:  []string{"r1", " spaced key "},
	},
	"/components/schemas/Reason/pattern": {
		template: `^[^{U}]*$`,
		accepts:  func(s string) bool { return noError(domain.NewReason(s)) },
		samples:  []string{"", "recount after audit"},
	},
	"/components/schemas/OrderID/allOf/0/pattern": {
		// Printable; the schema's own pattern refuses only dots and a
		// single /.
		template: `^[^{U}]+$`,
		accepts:  func(s string) bool { return noError(domain.NewRequestID(s)) },
		samples:  []string{"order-9f1c", " o 1 "},
	},
	"/components/schemas/OrderID/pattern": {
		samples: []string{"order-9f1c", " o 1 ", ".", "..", "/", "./"},
		also:    []string{"/components/schemas/OrderID/allOf/0/pattern"},
		whole:   func(s string) bool { return noError(domain.NewOrderID(s)) },
	},
	"/components/parameters/IdempotencyKey/schema/pattern": {
		// Visible ASCII, spaces inside: a header's other bytes name no
		// one key.
		accepts: func(s string) bool {
			r := &http.Request{Header: http.Header{"Idempotency-Key": {s}}}
			return noError(idempotencyKey(r)) && s == strings.Trim(s, " \t")
		},
		samples: []string{"k1", "key with spaces"},
	},
	"/components/schemas/WebhookURL/pattern": {
		// An absolute http(s) URL as Go's net/url reads it: a host of
		// the ASCII it takes or printable non-ASCII (or an IP literal),
		// a port of digits, percent escapes of two hex digits in the path
		// and fragment. A host's %-escapes, which Go also takes, are left
		// out, and an IP literal's own grammar is the server's to check
		// (the corpus varies the rest of such a URL); whether the address
		// may be reached is not a pattern's to say.
		template: `^[hH][tT][tT][pP][sS]?://(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9._~!$&'()*+,;=<>"\]-]|[^\x00-\x7F{U}])+)(?::[0-9]*)?(?:/(?:[^%?#{U}]|%[0-9A-Fa-f]{2})*)?(?:\?[^#{U}]*)?(?:#(?:[^%{U}]|%[0-9A-Fa-f]{2})*)?$`,
		accepts:  func(s string) bool { return noError(domain.ValidateWebhook(s, []string{"deducted"})) },
		samples:  []string{"https://hooks.example.com/in/1", "http://h.example", "HTTP://[::1]:8080/in/some/path%2F?q=1#frag"},
	},
	"/components/schemas/Instant/pattern":                             {samples: []string{"now", "-5m", "2026-02-28T23:59:59.5+01:00"}},
	"/components/parameters/HoldID/schema/pattern":                    {samples: []string{"0b6c0ad2-5f0e-4e8a-9d3c-7b1a2f3e4d5c"}},
	"/components/parameters/WebhookID/schema/pattern":                 {samples: []string{"wh_0b6c0ad2-5f0e-4e8a-9d3c-7b1a2f3e4d5c"}},
	"/components/parameters/AfterUserCursor/schema/pattern":           {samples: []string{"1712345678901234_0b6c0ad2-5f0e-4e8a-9d3c-7b1a2f3e4d5c"}},
	"/components/schemas/WebhookWithSecret/properties/secret/pattern": {samples: []string{"whsec_AbC+/9="}},
}

// unprintableClass is domain.Unprintable as the body of a character class
// of literal characters, which Go's regexp, Python's re and ECMA-262 with
// the u flag read alike. The surrogates are left out: no UTF-8 text holds
// them, and no YAML or JSON string can carry them to an engine.
func unprintableClass() string {
	var b strings.Builder
	add := func(lo, hi rune) {
		if lo <= 0xdfff && hi >= 0xd800 {
			if lo < 0xd800 {
				b.WriteString(string(lo) + "-" + string(rune(0xd7ff)))
			}
			if lo = 0xe000; hi < lo {
				return
			}
		}
		b.WriteRune(lo)
		if hi > lo {
			b.WriteString("-" + string(hi))
		}
	}
	for _, r := range domain.Unprintable.R16 {
		add(rune(r.Lo), rune(r.Hi))
	}
	for _, r := range domain.Unprintable.R32 {
		add(rune(r.Lo), rune(r.Hi))
	}
	return b.String()
}

// render is a template with {U} as unprintableClass.
func render(template string) string { return strings.ReplaceAll(template, "{U}", unprintableClass()) }

// yamlQuoted is s as a YAML double-quoted scalar of printable ASCII: every
// other character a \u or \U escape, which YAML readers turn back into it.
func yamlQuoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// patternsOf lists, by JSON pointer, every pattern keyword of a JSON
// document, as the committed Python and Node checks find them.
func patternsOf(v any, at string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			where := at + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			if p, isString := sub.(string); k == "pattern" && isString {
				out[where] = p
			} else {
				patternsOf(sub, where, out)
			}
		}
	case []any:
		for i, sub := range v {
			patternsOf(sub, at+"/"+strconv.Itoa(i), out)
		}
	}
}

// TestSpecPatternsAreDerivedFromUnprintable: docs/openapi.yaml's
// printable-text patterns are their templates with domain.Unprintable
// spelled out, so the server's check and the description cannot part;
// `go test ./internal/httpapi -run TestSpecPatternsAreDerived -update`
// rewrites them after the list changes. Every pattern has an entry.
func TestSpecPatternsAreDerivedFromUnprintable(t *testing.T) {
	t.Parallel()
	patterns := servedPatterns(t)
	for where := range patterns {
		if _, known := specPatterns[where]; !known {
			t.Errorf("docs/openapi.yaml has a pattern at %s that specPatterns does not know: add it, with the server's check of the value", where)
		}
	}
	yaml, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rewritten := yaml
	for _, where := range slices.Sorted(maps.Keys(specPatterns)) {
		sp, got := specPatterns[where], patterns[where]
		if got == "" {
			t.Errorf("docs/openapi.yaml has no pattern at %s", where)
			continue
		}
		if sp.template == "" || got == render(sp.template) {
			continue
		}
		old := []byte("pattern: " + yamlQuoted(got))
		if !*updateSpec || bytes.Count(rewritten, old) != 1 {
			t.Errorf("docs/openapi.yaml %s: the pattern is not its template with domain.Unprintable; want\n  pattern: %s\n(-update rewrites it when the pattern is written as this test writes it)", where, yamlQuoted(render(sp.template)))
			continue
		}
		rewritten = bytes.Replace(rewritten, old, []byte("pattern: "+yamlQuoted(render(sp.template))), 1)
	}
	if *updateSpec && !bytes.Equal(rewritten, yaml) {
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", "openapi.yaml"), rewritten, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote docs/openapi.yaml: rebuild and run the test again")
	}
}

// servedPatterns are the patterns of GET /v1/openapi.json, by pointer.
func servedPatterns(t *testing.T) map[string]string {
	t.Helper()
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	patterns := map[string]string{}
	patternsOf(doc, "", patterns)
	return patterns
}

// probes are the characters the corpus puts into each sample: both sides
// of every bound of domain.Unprintable and the middle of each of its
// ranges, all of ASCII, and letters, marks,
// emoji, unassigned code points and the last code point, most of them
// beyond the BMP, where UTF-16 engines see two units.
func probes() []rune {
	out := []rune{0x00e9, 0x0301, 0x4e2d, 0x1f600, 0x1d11e, 0x20000, 0x30000, 0xe0100, 0x0378, 0x40000, 0xe0080, 0x10fffd, 0x10ffff}
	for r := rune(0); r < 0x80; r++ {
		out = append(out, r)
	}
	bound := func(lo, hi rune) {
		for _, r := range []rune{lo - 1, lo, (lo + hi) / 2, hi, hi + 1} {
			if r >= 0 && r <= unicode.MaxRune && utf8.ValidRune(r) {
				out = append(out, r)
			}
		}
	}
	for _, r := range domain.Unprintable.R16 {
		bound(rune(r.Lo), rune(r.Hi))
	}
	for _, r := range domain.Unprintable.R32 {
		bound(rune(r.Lo), rune(r.Hi))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// corpusEntry is one pattern's corpus as the Python and Node checks read it.
type corpusEntry struct {
	Pattern  string   `json:"pattern"`
	Values   []string `json:"values"`
	Expected []bool   `json:"expected"`
}

// specCorpus varies every sample of every pattern by each probe, alone,
// first, in the middle and last, and says for each value what the server
// answers (Go's regexp where the server parses more than the pattern).
// A user id not in NFC is left out: the pattern cannot say it.
func specCorpus(t *testing.T, patterns map[string]string) map[string]corpusEntry {
	t.Helper()
	corpus := map[string]corpusEntry{}
	for where, pattern := range patterns {
		sp := specPatterns[where]
		re, err := regexp.Compile(pattern)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		accepts := sp.accepts
		if accepts == nil {
			accepts = re.MatchString
		}
		seen := map[string]bool{}
		e := corpusEntry{Pattern: pattern, Values: []string{}, Expected: []bool{}}
		add := func(v string) {
			if seen[v] || strings.HasSuffix(where, "/UserID/pattern") && !norm.NFC.IsNormalString(v) {
				return
			}
			seen[v] = true
			e.Values = append(e.Values, v)
			e.Expected = append(e.Expected, accepts(v))
		}
		for _, s := range sp.samples {
			add(s)
			add(s + "\n") // Python's $ matches before a final newline too
			rs := []rune(s)
			for _, p := range probes() {
				add(string(p))
				for _, at := range []int{0, len(rs) / 2, len(rs)} {
					add(string(slices.Insert(slices.Clone(rs), at, p)))
				}
			}
		}
		corpus[where] = e
	}
	return corpus
}

// TestSpecPatternsMeanTheSameInEveryEngine compiles every pattern of the
// served description in Go's regexp, Python's re and ECMA-262 (Node,
// with the u flag, as JSON Schema says), and matches each with its corpus:
// every engine must answer as the server does, for ASCII, the bounds of
// the printable list, and characters beyond the BMP. Python and Node are
// Debian's (scripts/install-deps.sh); only `go test -short` off CI may do
// without them.
func TestSpecPatternsMeanTheSameInEveryEngine(t *testing.T) {
	t.Parallel()
	patterns := servedPatterns(t)
	corpus := specCorpus(t, patterns)
	for _, where := range slices.Sorted(maps.Keys(corpus)) {
		e := corpus[where]
		re := regexp.MustCompile(e.Pattern)
		wrong := 0
		for i, v := range e.Values {
			if re.MatchString(v) != e.Expected[i] {
				if wrong++; wrong <= 5 {
					t.Errorf("%s: Go's regexp matches %+q: %v, the server accepts it: %v", where, v, !e.Expected[i], e.Expected[i])
				}
			}
		}
	}
	// A schema that says part of its rule in allOf: the patterns
	// together mean the server's check.
	for _, where := range slices.Sorted(maps.Keys(specPatterns)) {
		sp := specPatterns[where]
		if sp.whole == nil {
			continue
		}
		wrong := 0
		for _, v := range corpus[where].Values {
			got := regexp.MustCompile(patterns[where]).MatchString(v)
			for _, also := range sp.also {
				got = got && regexp.MustCompile(patterns[also]).MatchString(v)
			}
			if got != sp.whole(v) {
				if wrong++; wrong <= 5 {
					t.Errorf("%s with %v matches %+q: %v, the server accepts it: %v", where, sp.also, v, got, !got)
				}
			}
		}
	}
	dir := t.TempDir()
	spec, corpusFile := filepath.Join(dir, "openapi.json"), filepath.Join(dir, "corpus.json")
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	cj, err := json.Marshal(corpus)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(corpusFile, cj, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, engine := range []struct {
		name, script, pkg string
		interpreters      []string
	}{
		{"Python's re", "specpatterns.py", "python3", []string{"/usr/bin/python3", "python3"}},
		{"ECMA-262 (Node)", "specpatterns.js", "nodejs", []string{"node", "nodejs"}},
	} {
		t.Run(engine.pkg, func(t *testing.T) {
			t.Parallel()
			bin := interpreter(t, engine.pkg, engine.interpreters)
			out, err := exec.Command(bin, filepath.Join("testdata", engine.script), spec, corpusFile).CombinedOutput()
			if err != nil {
				t.Errorf("%s (%s) disagrees with the server (%v):\n%s", engine.name, bin, err, out)
			}
		})
	}
}

// interpreter is the first of names on the machine; without one the test
// fails, but under -short off CI (make check on a machine not set up for
// make test) it is skipped.
func interpreter(t *testing.T, pkg string, names []string) string {
	t.Helper()
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	msg := fmt.Sprintf("none of %v is installed: scripts/install-deps.sh installs Debian's package %s", names, pkg)
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip(msg)
	}
	t.Fatal(msg)
	return ""
}

// TestSpecPatternsAreCheapToGenerate: a generator that makes values from a
// pattern (hypothesis, under schemathesis) expands each character class
// into its characters, and one that spells domain.Unprintable, ~138,000
// code points with the private use planes, several times makes generation
// too slow to finish (schemathesis gave up on user_id and order_id when
// theirs had ten). Each pattern may hold one such class; the rest of a
// rule goes in a cheap pattern beside it (the schema's, with the
// printable one in its allOf). WebhookURL is generated from its format.
func TestSpecPatternsAreCheapToGenerate(t *testing.T) {
	t.Parallel()
	for where, pattern := range servedPatterns(t) {
		if strings.Contains(where, "/WebhookURL/") {
			continue
		}
		re, err := syntax.Parse(pattern, syntax.Perl)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		big := 0
		var walk func(re *syntax.Regexp)
		walk = func(re *syntax.Regexp) {
			if re.Op == syntax.OpCharClass {
				n := 0
				for i := 0; i < len(re.Rune); i += 2 {
					n += int(re.Rune[i+1]-re.Rune[i]) + 1
				}
				// A negated class is written as what it leaves out.
				if min(n, unicode.MaxRune+1-n) > 10000 {
					big++
				}
			}
			for _, sub := range re.Sub {
				walk(sub)
			}
		}
		walk(re)
		if big > 1 {
			t.Errorf("%s: %d character classes of over 10,000 code points; a generator expands each, and more than one is too slow", where, big)
		}
	}
}
