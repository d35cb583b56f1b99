package httpapi

import (
	"context"
	"fmt"
	"net/http"
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
	return doc.MarshalJSON()
})

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
