package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's top directory, seen from this package.
const root = ".."

// markdownFiles returns the documentation the tests below read, relative
// to root: the top-level *.md files and every *.md under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.Join(root, "docs", path))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		files[i], _ = filepath.Rel(root, f)
	}
	if !slices.Contains(files, "README.md") || !slices.Contains(files, "docs/api.md") {
		t.Fatalf("found %v, without README.md or docs/api.md", files)
	}
	return files
}

var (
	fencedBlock = regexp.MustCompile("(?ms)^```.*?^```[ \t]*$")
	inlineCode  = regexp.MustCompile("`[^`\n]*`")
	mdLink      = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading     = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
)

// prose is a Markdown file's text without its code: links and headings in
// code blocks and code spans are not links and headings.
func prose(text string) string {
	return inlineCode.ReplaceAllString(fencedBlock.ReplaceAllString(text, ""), "")
}

// anchors returns the fragment ids GitHub gives a Markdown file's headings.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fencedBlock.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.ReplaceAll(m[1], "`", "")) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[id+"-"+strconv.Itoa(n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// TestMarkdownLinksResolve: every relative link (and image) in README.md,
// the other top-level documents and docs/ names a file that exists, and a
// #fragment names a heading of its file.
func TestMarkdownLinksResolve(t *testing.T) {
	for _, file := range markdownFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(prose(string(text)), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), path)
			}
			body, err := os.ReadFile(filepath.Join(root, target))
			if err != nil {
				if info, serr := os.Stat(filepath.Join(root, target)); serr != nil || !info.IsDir() || frag != "" {
					t.Errorf("%s: link %s: %s does not exist", file, link, target)
				}
				continue
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchors(string(body))[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", file, link, target, frag)
			}
		}
	}
}

// TestAnchorsAreGitHubs pins the heading ids the link test expects.
func TestAnchorsAreGitHubs(t *testing.T) {
	ids := anchors("# Why\n## Retirement: Redis keeps only what is hot\n## Tuning done in this change (before → after)\n" +
		"### `--compare`\n```sh\n# not a heading\n```\n## Why\n")
	for _, id := range []string{"why", "retirement-redis-keeps-only-what-is-hot", "tuning-done-in-this-change-before--after", "--compare", "why-1"} {
		if !ids[id] {
			t.Errorf("no anchor %q in %v", id, ids)
		}
	}
	if ids["not-a-heading"] {
		t.Error("a comment in a code block was taken for a heading")
	}
}

// TestLayoutListsEveryPackage: README.md's Layout table has a row for
// every directory holding a Go package, and no row for one that is gone.
func TestLayoutListsEveryPackage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+/)` \\|").FindAllStringSubmatch(layout, -1) {
		rows[m[1]] = true
	}
	var packages []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			if rel != "." && !slices.Contains(packages, rel+"/") {
				packages = append(packages, rel+"/")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(packages) < 10 {
		t.Fatalf("found only %d packages: %v", len(packages), packages)
	}
	for _, p := range packages {
		if !rows[p] {
			t.Errorf("README.md's Layout table has no row for the package `%s`", p)
		}
	}
	for r := range rows {
		if info, err := os.Stat(filepath.Join(root, r)); err != nil || !info.IsDir() {
			t.Errorf("README.md's Layout table lists `%s`, which does not exist", r)
		}
	}
}

// TestDocsCiteNoIssueOrWorkspace: the documents stand on their own: none
// points to an issue of the tracker by number, or into the machine's
// workspace, neither of which a reader of the repository has.
func TestDocsCiteNoIssueOrWorkspace(t *testing.T) {
	forbidden := regexp.MustCompile(`(?i)\bissues?\s*#?\d+|/work/`)
	for _, file := range markdownFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			if m := forbidden.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say what it is instead", file, i+1, m)
			}
		}
	}
}
