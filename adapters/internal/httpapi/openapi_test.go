package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIListsEveryRouteAndNoOther: docs/openapi.yaml is a valid
// OpenAPI document whose operations are exactly the handler's routes, and
// GET /v1/openapi.json serves it without a token. That every answer
// matches it is server's TestEveryRouteAnswersAsTheOpenAPIDescriptionSays.
func TestOpenAPIListsEveryRouteAndNoOther(t *testing.T) {
	doc, err := LoadOpenAPI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var described []string
	for path, item := range doc.Paths.Map() {
		if path == "/console" || strings.HasPrefix(path, "/console/") {
			continue // the console's own: internal/console's TestOpenAPIListsEveryConsoleRoute
		}
		for method := range item.Operations() {
			described = append(described, method+" "+path)
		}
	}
	routes := Routes()
	slices.Sort(described)
	slices.Sort(routes)
	for _, r := range routes {
		if !slices.Contains(described, r) {
			t.Errorf("route %s is not in docs/openapi.yaml", r)
		}
	}
	for _, d := range described {
		if !slices.Contains(routes, d) {
			t.Errorf("docs/openapi.yaml describes %s, which the handler does not serve", d)
		}
	}

	st := newStubStack(t)
	resp, err := http.Get(st.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /v1/openapi.json = %d %s, want 200 JSON without a token", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func newStubStack(t *testing.T) *httptest.Server {
	t.Helper()
	h, err := NewHandler(stubbed(t, Config{}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
