package layers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/invledger/invledger"

// publicSurface is every package an importer may rely on (README.md,
// Layout). A new exported package goes here only on purpose: everything
// else belongs under an internal/ folder.
var publicSurface = []string{
	"domain", "ledger", "ledger/reconcile", "ledger/seal",
	"projections", "projections/streamentry", "migrations",
	"adapters/app", "adapters/server", "adapters/client", "adapters/wire", "adapters/cli",
	"adapters/testkit/localstack", "adapters/testkit/localstack/localstacktest", "adapters/testkit/stacktest",
	"adapters/testkit/brokertest", "adapters/testkit/benchkit", "adapters/testkit/servechild",
	"docs",
	// The broker export's example consumer: documentation that runs, importing only wire.
	"docs/orderconsumer",
}

// cardFolders are the design card's top-level folders that hold library
// code; cmd holds main packages only.
var cardFolders = []string{"domain", "ledger", "projections", "adapters", "migrations"}

// floor orders the layers: a package imports only from its own floor or
// below. The domain, the wire types and the root's helpers are the
// ground; ledger is the application; the projections, the migrations and
// the adapters' guts (with the Go client) stand on it; the composition
// root wires them; server runs what it built; the CLI and the test kit
// drive the whole; main packages, scripts and the lab sit on top.
func floor(pkg string) int {
	under := func(dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
	switch {
	case under("domain"), under("adapters/wire"), under("docs"), under("internal"):
		return 0
	case under("ledger"):
		return 1
	case under("adapters/internal/approot"), under("adapters/app"):
		return 3
	case under("adapters/server"):
		return 4
	case under("adapters/cli"), under("adapters/testkit"):
		return 5
	case under("cmd"), under("scripts"), under("tools"), under("clients"):
		return 6
	default: // projections, migrations, the adapters' guts, the Go client
		return 2
	}
}

type listed struct {
	Dir        string
	ImportPath string
	Name       string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// list is every package of the main module and of the lab's (tools/),
// which imports the main module's packages like any importer.
func list(t *testing.T) []listed {
	t.Helper()
	var pkgs []listed
	for _, m := range []struct{ dir, pattern string }{{"../..", module + "/..."}, {"../../tools", module + "/tools/..."}} {
		cmd := exec.Command("go", "list", "-deps=false", "-json=Dir,ImportPath,Name,GoFiles,Imports,Deps", m.pattern)
		cmd.Dir = m.dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", m.pattern, err, stderr.String())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var p listed
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) < 20 || !slices.ContainsFunc(pkgs, func(p listed) bool { return strings.HasPrefix(p.ImportPath, module+"/tools/") }) {
		t.Fatalf("go list found only %d packages, or none of tools/", len(pkgs))
	}
	return pkgs
}

func own(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// internalPath reports whether Go's internal rule hides rel from importers.
func internalPath(rel string) bool {
	return rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") || strings.HasSuffix(rel, "/internal")
}

// importable is the main module's and the lab's library packages an
// importer could use: not main, not internal, not tests alone.
func importable(t *testing.T) []listed {
	var out []listed
	for _, p := range list(t) {
		rel, _ := own(p.ImportPath)
		// A directory of tests only (clients/php's harness) exports nothing.
		if p.Name != "main" && len(p.GoFiles) > 0 && !internalPath(rel) {
			out = append(out, p)
		}
	}
	return out
}

func TestEveryImportablePackageIsPublicSurfaceInTheCardsFolders(t *testing.T) {
	var found []string
	for _, p := range importable(t) {
		rel, _ := own(p.ImportPath)
		found = append(found, rel)
		if !slices.Contains(publicSurface, rel) {
			t.Errorf("%s is importable but not part of the public surface: move it under an internal/ folder, or add it to the README's list and publicSurface on purpose", rel)
		}
		top, _, _ := strings.Cut(rel, "/")
		if !slices.Contains(cardFolders, top) && top != "docs" {
			t.Errorf("%s is a library outside the design card's folders (%s) and docs/", rel, strings.Join(cardFolders, ", "))
		}
	}
	for _, want := range publicSurface {
		if !slices.Contains(found, want) {
			t.Errorf("the public surface lists %s, which go list does not find", want)
		}
	}
}

func TestCmdHoldsOnlyMainPackages(t *testing.T) {
	for _, p := range list(t) {
		if rel, _ := own(p.ImportPath); strings.HasPrefix(rel, "cmd/") && p.Name != "main" && len(p.GoFiles) > 0 {
			t.Errorf("%s is package %s: cmd/ holds main packages only", rel, p.Name)
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
			if rel == "adapters/wire" && strings.Contains(strings.SplitN(dep, "/", 2)[0], ".") {
				t.Errorf("wire links %s, which is not the standard library", dep)
			}
		}
	}
}

// TestThePublicSurfaceHandsOutNoInternalType walks every exported
// function, method, type, field, var and const of the public packages: none
// names a type of an internal package, which an importer could then hold
// without being able to name, and whose methods would be public in
// practice.
func TestThePublicSurfaceHandsOutNoInternalType(t *testing.T) {
	for _, p := range importable(t) {
		for _, leak := range internalTypesHandedOut(t, p.Dir) {
			t.Errorf("%s", leak)
		}
	}
}

func internalTypesHandedOut(t *testing.T, dir string) (leaks []string) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			imports := map[string]string{}
			for _, is := range f.Imports {
				path, _ := strconv.Unquote(is.Path.Value)
				name := filepath.Base(path)
				if is.Name != nil {
					name = is.Name.Name
				}
				imports[name] = path
			}
			check := func(what string, n ast.Node) {
				if n == nil {
					return
				}
				ast.Inspect(n, func(n ast.Node) bool {
					se, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if id, ok := se.X.(*ast.Ident); ok && internalPath(strings.TrimPrefix(imports[id.Name], module+"/")) {
						leaks = append(leaks, fmt.Sprintf("%s: %s names %s.%s", fset.Position(se.Pos()), what, imports[id.Name], se.Sel.Name))
					}
					return true
				})
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && exportedReceiver(d.Recv) {
						check(d.Name.Name, d.Type)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							st, ok := s.Type.(*ast.StructType)
							if !ok {
								check(s.Name.Name, s.Type)
								continue
							}
							for _, fld := range st.Fields.List {
								if len(fld.Names) == 0 || slices.ContainsFunc(fld.Names, (*ast.Ident).IsExported) {
									check(s.Name.Name+"'s field", fld.Type)
								}
							}
						case *ast.ValueSpec:
							if slices.ContainsFunc(s.Names, (*ast.Ident).IsExported) {
								check(s.Names[0].Name, s.Type)
							}
						}
					}
				}
			}
		}
	}
	return leaks
}

// exportedReceiver reports whether a function is a plain function or a
// method of an exported type.
func exportedReceiver(recv *ast.FieldList) bool {
	if recv == nil {
		return true
	}
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
