package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/invledger/invledger/docs"
)

// LoadOpenAPI parses and validates the API's OpenAPI description,
// docs/openapi.yaml.
func LoadOpenAPI(ctx context.Context) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	return doc, nil
}

// openAPIJSON is the description as JSON, made once: GET /v1/openapi.json.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	doc, err := LoadOpenAPI(context.Background())
	if err != nil {
		return nil, err
	}
	raw, err := doc.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return exactInt64Bounds(raw)
})

// exactInt64Bounds gives back the int64 bounds the YAML spells and
// kin-openapi's float64 loses: 9223372036854775807 comes out of it as
// 9223372036854776000, 2^63, which no int64 holds, so a client taking the
// maximum at its word is refused. Every minimum and maximum of an int64
// integer schema beyond int64's range is put back at its end.
func exactInt64Bounds(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "integer" && v["format"] == "int64" {
				for _, bound := range []string{"minimum", "maximum"} {
					n, ok := v[bound].(json.Number)
					if !ok {
						continue
					}
					switch f, _ := strconv.ParseFloat(string(n), 64); {
					case f >= math.MaxInt64:
						v[bound] = json.Number(strconv.FormatInt(math.MaxInt64, 10))
					case f <= math.MinInt64:
						v[bound] = json.Number(strconv.FormatInt(math.MinInt64, 10))
					}
				}
			}
			for _, sub := range v {
				walk(sub)
			}
		case []any:
			for _, sub := range v {
				walk(sub)
			}
		}
	}
	walk(doc)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

func (s *server) openAPI(w http.ResponseWriter, r *http.Request) {
	b, err := openAPIJSON()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeRaw(w, http.StatusOK, b)
}

// Routes lists every route the handler serves as "METHOD /path", with
// net/http's {wildcards}: the table the OpenAPI test holds the
// description to.
func Routes() []string {
	var out []string
	for _, rt := range (&server{}).routes() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}
