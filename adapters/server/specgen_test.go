package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/httpapi"
)

// schemaGen makes JSON values from docs/openapi.yaml's schemas: valid ones
// by every keyword the spec uses (type, const, enum, pattern, format,
// minimum, maximum, lengths, items, required, additionalProperties), and
// invalid ones that break exactly one keyword. It proposes; the caller
// holds each whole request to kin-openapi's validator, so a proposal the
// schema does not classify as intended is discarded, not sent.
type schemaGen struct {
	rnd   *rand.Rand
	keys  map[string]bool     // the Idempotency-Keys of the requests made
	known map[string][]string // resource ids answers gave, by member name (harvest)
	// served is GET /v1/openapi.json as a client reads it, numbers as
	// written: the bounds a client takes at their word.
	served map[string]any
}

// nonASCII are the letters and symbols text may hold beside ASCII: each is
// NFC on its own and next to ASCII, which schemas cannot say but user ids
// must be. Some are beyond the BMP, and U+0378 is a code point Unicode has
// not assigned, which printable text may hold (domain.Unprintable).
var nonASCII = []rune("éßЖ中ü€ñ😀𠀀͸")

// hostile are the characters an invalid string is given: controls,
// spaces other than U+0020, format characters (a bidirectional override
// and a tag among them), private use, noncharacters, U+FFFD and ASCII the
// patterns leave out.
var hostile = []rune{0, 0x1f, 0x7f, 0x85, 0xa0, 0x200b, 0x2028, 0x202e, 0xe000, 0xfeff, 0xfffd, 0xffff, 0xe0001, 0x10ffff, ' ', '{', '/', '%', '?', '#', 'é'}

// valid returns a value s accepts.
func (g *schemaGen) valid(s *openapi3.Schema) any {
	switch {
	case s.Const != nil:
		return s.Const
	case len(s.Enum) > 0:
		return s.Enum[g.rnd.IntN(len(s.Enum))]
	case len(s.OneOf) > 0:
		return g.valid(s.OneOf[g.rnd.IntN(len(s.OneOf))].Value)
	case len(s.AnyOf) > 0:
		return g.valid(s.AnyOf[g.rnd.IntN(len(s.AnyOf))].Value)
	case len(s.AllOf) == 1 && s.Type == nil:
		return g.valid(s.AllOf[0].Value)
	}
	types := s.Type.Slice()
	if len(types) == 0 {
		return "x"
	}
	switch t := types[g.rnd.IntN(len(types))]; t {
	case "null":
		return nil
	case "boolean":
		return g.rnd.IntN(2) == 0
	case "integer":
		return g.integer(s)
	case "string":
		return g.str(s)
	case "array":
		n := int(s.MinItems) + g.rnd.IntN(3)
		if s.MaxItems != nil && uint64(n) > *s.MaxItems {
			n = int(*s.MaxItems)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = g.valid(s.Items.Value)
		}
		if key, ok := s.Extensions["x-invledger-unique-by"].(string); ok {
			// Items must differ in key: keep the first of each.
			seen := map[any]bool{}
			out = slices.DeleteFunc(out, func(item any) bool {
				v := item.(map[string]any)[key]
				dup := seen[v]
				seen[v] = true
				return dup
			})
			if uint64(len(out)) < s.MinItems {
				return g.valid(s)
			}
			if !s.UniqueItems && len(out) > 0 && (s.MaxItems == nil || uint64(len(out)) < *s.MaxItems) && g.rnd.IntN(3) == 0 {
				// What a tool that cannot read the extension may send,
				// unless uniqueItems tells it: an item twice.
				out = append(out, out[0])
			}
		}
		return out
	case "object":
		out := map[string]any{}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			if slices.Contains(s.Required, name) || g.rnd.IntN(2) == 0 {
				out[name] = g.valid(s.Properties[name].Value)
				if known := g.seen(name, s.Properties[name].Value); known != nil && g.rnd.IntN(2) == 0 {
					out[name] = known
				}
			}
		}
		return out
	default:
		panic("schemaGen: type " + t)
	}
}

// integer is one of s's bounds, a small number above its minimum, or a
// large one up to its maximum (up to 2^64 when it has none), as a
// json.Number so that no float rounds it.
func (g *schemaGen) integer(s *openapi3.Schema) json.Number {
	lo, hi := -1e3, math.Pow(2, 64)
	if s.Min != nil {
		lo = *s.Min
	}
	if s.Max != nil {
		hi = *s.Max
	}
	var n float64
	switch g.rnd.IntN(4) {
	case 0:
		n = lo
	case 1:
		n = hi
	case 2:
		n = lo + float64(g.rnd.IntN(50))
	default:
		n = lo + g.rnd.Float64()*(hi-lo)
	}
	n = math.Max(lo, math.Min(hi, math.Floor(n)))
	if n >= math.MaxInt64 && s.Max != nil {
		// A float cannot hold 2^63-1, the int64 maximum the spec gives.
		return json.Number(strconv.FormatInt(math.MaxInt64, 10))
	}
	return json.Number(strconv.FormatFloat(n, 'f', 0, 64))
}

// str is a string of s: from its format or its pattern when it has one,
// else printable text within its lengths. A format is generated, never
// trusted to refuse: kin-openapi does not check uuid or date-time, so a
// parameter the server parses needs a pattern.
func (g *schemaGen) str(s *openapi3.Schema) string {
	switch s.Format {
	case "uuid":
		var b [16]byte
		for i := range b {
			b[i] = byte(g.rnd.IntN(256))
		}
		return uuid.UUID(b).String()
	case "date-time":
		return time.Unix(g.rnd.Int64N(4e9), 0).UTC().Format(time.RFC3339)
	case "uri":
		return fmt.Sprintf("https://hooks%d.example.com/in/%d", g.rnd.IntN(100), g.rnd.IntN(1000))
	}
	if s.Pattern != "" {
		re, err := syntax.Parse(s.Pattern, syntax.Perl)
		if err != nil {
			panic(err)
		}
		var b strings.Builder
		g.regex(&b, re.Simplify())
		return b.String()
	}
	most := uint64(24)
	if s.MaxLength != nil {
		most = *s.MaxLength
	}
	n := int(s.MinLength) + g.rnd.IntN(int(min(most, s.MinLength+24)-s.MinLength)+1)
	if g.rnd.IntN(8) == 0 {
		n = int(most) // the longest allowed
	}
	out := make([]rune, n)
	for i := range out {
		out[i] = rune(' ' + g.rnd.IntN(95))
		if g.rnd.IntN(10) == 0 {
			out[i] = nonASCII[g.rnd.IntN(len(nonASCII))]
		}
	}
	return string(out)
}

// regex writes a string re matches.
func (g *schemaGen) regex(b *strings.Builder, re *syntax.Regexp) {
	repeat := func(lo, hi int) {
		if hi < 0 {
			hi = lo + 4
		}
		n := lo + g.rnd.IntN(min(hi-lo, 8)+1)
		if g.rnd.IntN(8) == 0 {
			n = hi
		}
		for range n {
			g.regex(b, re.Sub[0])
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		b.WriteRune(g.classRune(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteRune(rune('!' + g.rnd.IntN(94)))
	case syntax.OpCapture:
		g.regex(b, re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			g.regex(b, sub)
		}
	case syntax.OpAlternate:
		g.regex(b, re.Sub[g.rnd.IntN(len(re.Sub))])
	case syntax.OpStar:
		repeat(0, 4)
	case syntax.OpPlus:
		repeat(1, 5)
	case syntax.OpQuest:
		repeat(0, 1)
	case syntax.OpRepeat:
		repeat(re.Min, re.Max)
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpEmptyMatch:
	default:
		panic("schemaGen: regexp operator " + re.Op.String())
	}
}

// classRune picks a rune of the class ranges (pairs of bounds): mostly
// printable ASCII, sometimes one of nonASCII, when the class holds them.
func (g *schemaGen) classRune(ranges []rune) rune {
	in := func(r rune) bool {
		for i := 0; i < len(ranges); i += 2 {
			if ranges[i] <= r && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	if g.rnd.IntN(6) == 0 {
		if r := nonASCII[g.rnd.IntN(len(nonASCII))]; in(r) {
			return r
		}
	}
	for range 64 {
		if r := rune(' ' + g.rnd.IntN(95)); in(r) {
			return r
		}
	}
	return ranges[0]
}

// invalid returns a value s refuses, made by breaking one of its keywords,
// and what it broke; ok is false when s refuses nothing this can make.
// Nested objects and arrays are broken inside as well as as a whole.
func (g *schemaGen) invalid(s *openapi3.Schema) (v any, what string, ok bool) {
	var options []func() (any, string)
	types := s.Type.Slice()
	if s.Const == nil && len(s.Enum) == 0 && len(s.OneOf) == 0 && len(s.AnyOf) == 0 && len(s.AllOf) == 1 && s.Type == nil {
		return g.invalid(s.AllOf[0].Value)
	}
	if !slices.Contains(types, "null") {
		options = append(options, func() (any, string) { return nil, "null" })
	}
	if !slices.Contains(types, "string") {
		options = append(options, func() (any, string) { return "x", "a string" })
	}
	if !slices.Contains(types, "integer") && !slices.Contains(types, "number") {
		options = append(options, func() (any, string) { return json.Number("7"), "a number" })
	}
	if len(s.Enum) > 0 || s.Const != nil {
		options = append(options, func() (any, string) { return "not-one-of-them", "not in the enum" })
	}
	switch {
	case slices.Contains(types, "integer"):
		options = append(options, func() (any, string) { return json.Number("1.5"), "a fraction" })
		if s.Min != nil {
			options = append(options, func() (any, string) {
				return json.Number(strconv.FormatFloat(*s.Min-1-float64(g.rnd.IntN(3)), 'f', 0, 64)), "below the minimum"
			})
		}
		if s.Max != nil {
			options = append(options, func() (any, string) {
				// Above 2^53 a float's +1 is lost: go a tenth beyond.
				return json.Number(strconv.FormatFloat(max(*s.Max+1, *s.Max*1.1), 'f', 0, 64)), "above the maximum"
			})
		}
	case slices.Contains(types, "string"):
		if s.MinLength > 0 {
			options = append(options, func() (any, string) { return "", "empty" })
		}
		if s.MaxLength != nil {
			options = append(options, func() (any, string) { return strings.Repeat("a", int(*s.MaxLength)+1), "too long" })
		}
		if s.Pattern != "" || s.Format != "" || s.MaxLength != nil {
			options = append(options, func() (any, string) {
				r := []rune(g.str(s))
				i := g.rnd.IntN(len(r) + 1)
				return string(slices.Insert(r, i, hostile[g.rnd.IntN(len(hostile))])), "a character it refuses"
			})
		}
	case slices.Contains(types, "array"):
		options = append(options, func() (any, string) { return map[string]any{}, "an object" })
		if s.MinItems > 0 {
			options = append(options, func() (any, string) { return []any{}, "too few items" })
		}
		if s.MaxItems != nil {
			options = append(options, func() (any, string) {
				out := make([]any, *s.MaxItems+1)
				for i := range out {
					out[i] = g.valid(s.Items.Value)
				}
				return out, "too many items"
			})
		}
		options = append(options, func() (any, string) {
			out, _ := g.valid(s).([]any)
			item, what, ok := g.invalid(s.Items.Value)
			if !ok {
				return nil, "null"
			}
			return append(out, item), "an item " + what
		})
	case slices.Contains(types, "object"):
		options = append(options, func() (any, string) { return []any{}, "an array" })
		if len(s.Required) > 0 {
			options = append(options, func() (any, string) {
				out := g.valid(s).(map[string]any)
				name := s.Required[g.rnd.IntN(len(s.Required))]
				delete(out, name)
				return out, name + " missing"
			})
		}
		if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
			options = append(options, func() (any, string) {
				out := g.valid(s).(map[string]any)
				out["unexpected"] = 1
				return out, "an unknown property"
			})
		}
		if len(s.Properties) > 0 {
			options = append(options, func() (any, string) {
				out := g.valid(s).(map[string]any)
				names := slices.Sorted(maps.Keys(s.Properties))
				name := names[g.rnd.IntN(len(names))]
				v, what, ok := g.invalid(s.Properties[name].Value)
				if !ok {
					return nil, "null"
				}
				out[name] = v
				return out, name + " " + what
			})
		}
	}
	if len(options) == 0 {
		return nil, "", false
	}
	v, what = options[g.rnd.IntN(len(options))]()
	return v, what, true
}

// paramText is v as a path, query or header parameter carries it.
func paramText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "null"
	case json.Number:
		return string(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// printableText reports whether s can travel in an HTTP header: the
// generator's hostile controls cannot, and net/http refuses to send them.
func printableText(s string) bool {
	for _, r := range s {
		if r < ' ' && r != '\t' || r == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}

// specPatterns reports, by schema, the patterns of doc that do not compile as the Go
// as the Go regexp kin-openapi checks them with, or are not anchored at
// both ends: an unanchored pattern accepts anything that contains a match.
func specPatterns(doc *openapi3.T) map[string]string {
	bad := map[string]string{}
	var walk func(where string, s *openapi3.SchemaRef, seen map[*openapi3.Schema]bool)
	walk = func(where string, s *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		seen[s.Value] = true
		v := s.Value
		if v.Pattern != "" {
			if _, err := regexp.Compile(v.Pattern); err != nil {
				bad[where] = err.Error()
			} else if !strings.HasPrefix(v.Pattern, "^") || !strings.HasSuffix(v.Pattern, "$") {
				bad[where] = "pattern " + v.Pattern + " is not anchored with ^ and $"
			}
		}
		for name, p := range v.Properties {
			walk(where+"."+name, p, seen)
		}
		walk(where+"[]", v.Items, seen)
		for _, sub := range slices.Concat(v.OneOf, v.AnyOf, v.AllOf) {
			walk(where, sub, seen)
		}
	}
	seen := map[*openapi3.Schema]bool{}
	for name, s := range doc.Components.Schemas {
		walk(name, s, seen)
	}
	for name, p := range doc.Components.Parameters {
		walk(name, p.Value.Schema, seen)
	}
	return bad
}

// TestOpenAPIDescriptionIsClean holds docs/openapi.yaml to what a linter
// (redocly's recommended rules) checks beyond kin-openapi's validation,
// which LoadOpenAPI runs: no path ends in a slash (routers take /x/ and /x
// for two paths); every tag is declared and described; every operation has
// a unique operationId, a summary and declared tags, and either roles or
// its own security (none, or the console's session); every integer
// parameter has a maximum; every pattern compiles as the Go regexp the
// validator uses and is anchored. Left, as redocly reports them: health,
// metrics and this document describe no 4xx, and the console's redirects
// no 2xx, because they answer none.
func TestOpenAPIDescriptionIsClean(t *testing.T) {
	doc, err := httpapi.LoadOpenAPI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]bool{}
	for _, tag := range doc.Tags {
		tags[tag.Name] = true
		if tag.Description == "" {
			t.Errorf("tag %s has no description", tag.Name)
		}
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		if path != "/" && strings.HasSuffix(path, "/") {
			t.Errorf("path %s ends in a slash", path)
		}
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" || ids[op.OperationID] != "" {
				t.Errorf("%s: operationId %q is missing or also %s's", where, op.OperationID, ids[op.OperationID])
			}
			ids[op.OperationID] = where
			if op.Summary == "" {
				t.Errorf("%s has no summary", where)
			}
			for _, tag := range op.Tags {
				if !tags[tag] {
					t.Errorf("%s: tag %s is not declared", where, tag)
				}
			}
			if _, ok := op.Extensions["x-invledger-roles"]; !ok && op.Security == nil {
				t.Errorf("%s names neither x-invledger-roles nor its own security", where)
			}
			for _, p := range parameters(&routers.Route{PathItem: item, Operation: op}) {
				if s := p.Value.Schema.Value; s.Type.Is("integer") && s.Max == nil {
					t.Errorf("%s: integer parameter %s has no maximum: a client may send what no int64 holds", where, p.Value.Name)
				}
			}
		}
	}
	for where, problem := range specPatterns(doc) {
		t.Errorf("%s: %s", where, problem)
	}
}
