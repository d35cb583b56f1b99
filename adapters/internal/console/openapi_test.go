package console

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/internal/httpapi"
)

// TestOpenAPIListsEveryConsoleRoute: docs/openapi.yaml describes exactly
// the console's routes, /console and those under /console/, each exempt from response
// validation (they answer HTML, redirects and an event stream).
func TestOpenAPIListsEveryConsoleRoute(t *testing.T) {
	doc, err := httpapi.LoadOpenAPI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var described []string
	for path, item := range doc.Paths.Map() {
		if path != Root && !strings.HasPrefix(path, Prefix) {
			continue
		}
		for method, op := range item.Operations() {
			described = append(described, method+" "+path)
			if op.Extensions["x-invledger-response-validation"] != "exempt" {
				t.Errorf("%s %s: want x-invledger-response-validation: exempt", method, path)
			}
		}
	}
	routes := Routes()
	for _, r := range routes {
		if !slices.Contains(described, r) {
			t.Errorf("console route %s is not in docs/openapi.yaml", r)
		}
	}
	for _, d := range described {
		if !slices.Contains(routes, d) {
			t.Errorf("docs/openapi.yaml describes %s, which the console does not serve", d)
		}
	}
}
