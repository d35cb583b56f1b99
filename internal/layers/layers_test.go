package layers_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/invledger/invledger"

// publicSurface is every package an importer may rely on (README.md,
// Layout). A new exported package goes here only on purpose: everything
// else belongs under internal/.
var publicSurface = []string{
	"app", "server", "domain", "ledger", "ledger/reconcile", "ledger/seal", "client", "wire",
	"testkit/localstack", "testkit/localstack/localstacktest", "docs",
	// The broker export's example consumer: documentation that runs, importing only wire.
	"docs/orderconsumer",
}

// floor orders the layers: a package imports only from its own floor or
// below. domain and wire are the ground; ledger is the application; the
// adapters under internal/ and the Go client sit on it; app composes them;
// server runs what app built; the command line, the demo and the test stack
// drive the whole.
func floor(pkg string) int {
	switch {
	case pkg == "domain" || pkg == "wire" || pkg == "docs":
		return 0
	case pkg == "ledger" || strings.HasPrefix(pkg, "ledger/"):
		return 1
	case pkg == "app":
		return 3
	case pkg == "server":
		return 4
	case pkg == "internal/cli" || strings.HasPrefix(pkg, "internal/cli/"), pkg == "internal/demo", pkg == "internal/stacktest",
		strings.HasPrefix(pkg, "cmd/"), strings.HasPrefix(pkg, "scripts/"):
		return 5
	default: // internal adapters, the client, the test kit
		return 2
	}
}

type listed struct {
	ImportPath string
	Name       string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

func list(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Name,GoFiles,Imports,Deps", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func own(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

func TestEveryImportablePackageIsPublicSurface(t *testing.T) {
	var found []string
	for _, p := range list(t) {
		rel, _ := own(p.ImportPath)
		// A directory of tests only (clients/php's harness) exports nothing.
		if p.Name == "main" || len(p.GoFiles) == 0 || rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") || strings.HasSuffix(rel, "/internal") {
			continue
		}
		found = append(found, rel)
		if !slices.Contains(publicSurface, rel) {
			t.Errorf("%s is importable but not part of the public surface: move it under internal/, or add it to the README's list and publicSurface on purpose", rel)
		}
	}
	for _, want := range publicSurface {
		if !slices.Contains(found, want) {
			t.Errorf("the public surface lists %s, which go list does not find", want)
		}
	}
}

func TestNoImportRunsUpAFloor(t *testing.T) {
	for _, p := range list(t) {
		rel, _ := own(p.ImportPath)
		for _, imp := range p.Imports {
			dep, ok := own(imp)
			if ok && floor(dep) > floor(rel) {
				t.Errorf("%s (floor %d) imports %s (floor %d): an import runs back up", rel, floor(rel), dep, floor(dep))
			}
		}
	}
}

// TestTheCoreLinksNoInfrastructure: domain and ledger link no Redis, SQL or
// Watermill, however indirectly, and wire links nothing but the standard
// library.
func TestTheCoreLinksNoInfrastructure(t *testing.T) {
	// database/sql/driver is not on the list: google/uuid links it for its
	// Valuer, which opens no connection.
	infrastructure := []string{"github.com/redis/", "github.com/jackc/", "github.com/ThreeDotsLabs/", "database/sql"}
	for _, p := range list(t) {
		rel, _ := own(p.ImportPath)
		core := rel == "domain" || rel == "ledger" || strings.HasPrefix(rel, "ledger/")
		for _, dep := range p.Deps {
			if core && slices.ContainsFunc(infrastructure, func(prefix string) bool {
				return dep == prefix || strings.HasPrefix(dep, prefix) && strings.HasSuffix(prefix, "/")
			}) {
				t.Errorf("%s links %s", rel, dep)
			}
			if rel == "wire" && strings.Contains(strings.SplitN(dep, "/", 2)[0], ".") {
				t.Errorf("wire links %s, which is not the standard library", dep)
			}
		}
	}
}
