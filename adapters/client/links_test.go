package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/client"
)

// TestClientLinksOnlyWhatAClientNeeds: an integrator's binary gets the
// domain's errors and the wire types from invledger, and none of the
// server: not its HTTP package, the application layer, metrics, tracing or
// the OpenAPI loader.
func TestClientLinksOnlyWhatAClientNeeds(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/invledger/invledger/"
	allowed := map[string]bool{module + "domain": true, module + "adapters/wire": true, module + "adapters/client": true}
	forbidden := []string{"github.com/prometheus/", "go.opentelemetry.io/", "github.com/getkin/kin-openapi"}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		if strings.HasPrefix(dep, module) && !allowed[dep] {
			t.Errorf("the client links %s; of invledger it may link only domain and wire", dep)
		}
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("the client links %s", dep)
			}
		}
	}
	t.Logf("%d non-standard packages: %s", len(deps), strings.Join(deps, " "))
}

// TestEveryMethodIsCalledByATest: each exported method of the Client is
// called somewhere in this package's tests, which all run against a real
// serve.
func TestEveryMethodIsCalledByATest(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
					called[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	ct := reflect.TypeFor[*client.Client]()
	for i := range ct.NumMethod() {
		if m := ct.Method(i).Name; !called[m] {
			t.Errorf("no test calls Client.%s", m)
		}
	}
}
