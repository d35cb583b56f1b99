package ledger

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPackageDocIndexesUseCasesAndPorts keeps the index in doc.go true:
// every port (an exported interface type) and every use case (an exported
// type with a method that takes a context, or an exported function that
// takes one and can fail) is linked from the package doc, and every name
// the doc puts in brackets is declared in the package.
func TestPackageDocIndexesUseCasesAndPorts(t *testing.T) {
	fset := token.NewFileSet()
	files := parsePackage(t, fset)
	p, err := doc.NewFromFiles(fset, files, "github.com/invledger/invledger/ledger")
	if err != nil {
		t.Fatal(err)
	}
	linked := docLinks(p.Parser().Parse(p.Doc))
	ports, useCases, declared := classify(files)
	if len(ports) < 20 || len(useCases) < 10 {
		t.Fatalf("found %d ports and %d use cases: the classification no longer sees the package", len(ports), len(useCases))
	}
	for _, name := range ports {
		if !linked[name] {
			t.Errorf("port %s is not indexed in ledger/doc.go: add it as [%s] under # Ports", name, name)
		}
	}
	for _, name := range useCases {
		if !linked[name] {
			t.Errorf("use case %s is not indexed in ledger/doc.go: add it as [%s] under # Use cases", name, name)
		}
	}
	// A doc link to an undeclared name is left as plain text by the parser,
	// so a renamed or removed name would silently drop out of the index.
	for _, m := range regexp.MustCompile(`\[([A-Za-z][A-Za-z0-9.]*)\]`).FindAllStringSubmatch(p.Doc, -1) {
		if !declared[m[1]] {
			t.Errorf("ledger/doc.go names [%s], which package ledger does not declare", m[1])
		}
	}
	for _, section := range []string{"Use cases", "Ports"} {
		if !strings.Contains(p.Doc, "# "+section+"\n") {
			t.Errorf("ledger/doc.go has no %q heading", section)
		}
	}
}

// parsePackage parses the package's own non-test files, with comments.
func parsePackage(t *testing.T, fset *token.FileSet) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// classify returns the exported interface types (ports), the use cases,
// and every exported name declared at package level.
func classify(files []*ast.File) (ports, useCases []string, declared map[string]bool) {
	declared = map[string]bool{}
	structs := map[string]bool{}
	withCtxMethod := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						declared[s.Name.Name] = true
						switch s.Type.(type) {
						case *ast.InterfaceType:
							ports = append(ports, s.Name.Name)
						case *ast.StructType:
							structs[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								declared[n.Name] = true
							}
						}
					}
				}
			case *ast.FuncDecl:
				if !d.Name.IsExported() || !takesContext(d.Type) {
					if d.Recv == nil && d.Name.IsExported() {
						declared[d.Name.Name] = true
					}
					continue
				}
				if d.Recv == nil {
					declared[d.Name.Name] = true
					if returnsError(d.Type) {
						useCases = append(useCases, d.Name.Name)
					}
					continue
				}
				withCtxMethod[receiverName(d.Recv.List[0].Type)] = true
			}
		}
	}
	for name := range withCtxMethod {
		if structs[name] {
			useCases = append(useCases, name)
		}
	}
	slices.Sort(ports)
	slices.Sort(useCases)
	return ports, useCases, declared
}

func takesContext(ft *ast.FuncType) bool {
	if ft.Params == nil || len(ft.Params.List) == 0 {
		return false
	}
	sel, ok := ft.Params.List[0].Type.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "context" && sel.Sel.Name == "Context"
}

func returnsError(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) == 0 {
		return false
	}
	id, ok := ft.Results.List[len(ft.Results.List)-1].Type.(*ast.Ident)
	return ok && id.Name == "error"
}

func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// docLinks returns the names of the package's own symbols the doc links to.
func docLinks(d *comment.Doc) map[string]bool {
	links := map[string]bool{}
	var walk func([]comment.Text)
	walk = func(texts []comment.Text) {
		for _, t := range texts {
			switch t := t.(type) {
			case *comment.DocLink:
				if t.ImportPath == "" && t.Recv == "" {
					links[t.Name] = true
				}
				walk(t.Text)
			case *comment.Link:
				walk(t.Text)
			case comment.Italic, comment.Plain:
			}
		}
	}
	for _, b := range d.Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if p, ok := c.(*comment.Paragraph); ok {
						walk(p.Text)
					}
				}
			}
		case *comment.Heading:
			walk(b.Text)
		}
	}
	return links
}
