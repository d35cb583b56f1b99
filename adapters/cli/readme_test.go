package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/cli/internal/devstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

// readmeCLIEnv, set to 1, makes the test binary run as the invledger CLI:
// TestREADMERunsAsWritten puts a script named invledger on PATH that runs
// the test binary so, which spares a go build of the command.
const readmeCLIEnv = "INVLEDGER_README_TEST_CLI"

// readmeBlock is one ```sh block of README.md or a docs/*.md file, with
// the marker before it.
type readmeBlock struct {
	file  string // as the messages name it: README.md, docs/api.md
	line  int    // line of the first line inside the fence
	lines []string
	skip  string // the reason, for a block marked skip
}

// readmeMarker is the comment that must precede every ```sh block.
var readmeMarker = regexp.MustCompile(`^<!-- readme-test: (run|skip: (.+)) -->$`)

// readmeFiles are the files whose shell blocks TestREADMERunsAsWritten
// runs, as the messages name them: README.md, then docs/*.md in the order
// of their names, so an example may use what an earlier file's created.
func readmeFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs { // Glob sorts them
		files = append(files, "docs/"+filepath.Base(d))
	}
	return files
}

// readmeBlocks returns the shell blocks of file (README.md or docs/x.md) in
// order. Every ```sh block must be marked run or skip, so none is left
// untested by mistake.
func readmeBlocks(t *testing.T, file string) []readmeBlock {
	t.Helper()
	f, err := os.Open(filepath.Join("../..", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks []readmeBlock
		cur    *readmeBlock
		marker string
		mline  int
		n      int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		text := sc.Text()
		switch {
		case cur != nil && text == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, text)
		case text == "```sh":
			m := readmeMarker.FindStringSubmatch(marker)
			if m == nil || mline != n-1 {
				t.Fatalf("%s:%d: a ```sh block needs <!-- readme-test: run --> or <!-- readme-test: skip: REASON --> on the line before it", file, n)
			}
			cur = &readmeBlock{file: file, line: n + 1, skip: m[2]}
		case strings.HasPrefix(text, "<!-- readme-test:"):
			marker, mline = text, n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed ```sh block", file, cur.line-1)
	}
	return blocks
}

// readmeExpect is the annotation that ends a command's last line:
// `# → 201 .sku=phone-x .remaining`, `# → 200`, or `# → exit 2`.
var readmeExpect = regexp.MustCompile(`#\s*→\s*(exit\s+\d+|\d{3})((?:\s+\.[^\s]+)*)\s*$`)

// readmeCommand is one command of a runnable block: its lines (joined at
// trailing backslashes) and what its annotation expects.
type readmeCommand struct {
	file   string
	line   int
	text   string
	status string   // "201", "exit 2", or "" for exit status 0
	fields []string // ".key" or ".key=value", dot paths into the JSON answer
}

func readmeCommands(t *testing.T, b readmeBlock) []readmeCommand {
	t.Helper()
	var cmds []readmeCommand
	for i := 0; i < len(b.lines); i++ {
		trimmed := strings.TrimSpace(b.lines[i])
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		c := readmeCommand{file: b.file, line: b.line + i, text: b.lines[i]}
		for strings.HasSuffix(b.lines[i], `\`) && i+1 < len(b.lines) {
			i++
			c.text += "\n" + b.lines[i]
		}
		last := b.lines[i]
		if m := readmeExpect.FindStringSubmatch(last); m != nil {
			c.status, c.fields = m[1], strings.Fields(m[2])
		}
		isCurl := regexp.MustCompile(`(^|[\s($])curl\s`).MatchString(c.text)
		if isCurl && (c.status == "" || strings.HasPrefix(c.status, "exit")) {
			t.Errorf("%s:%d: a curl in a runnable block needs `# → STATUS [.key[=value]...]` at its end", c.file, c.line)
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// readmePrelude defines curl and invledger as bash functions that run the
// real commands, record what each answered, and fail the script when the
// status differs from the line's annotation.
const readmePrelude = `set -e
readme_n=0
curl() {
  readme_n=$((readme_n+1))
  local body="$READMETEST_DIR/$readme_n.body" status
  status=$(command curl -sS -o "$body" -w '%{http_code}' "$@") || { echo "$readme_file:$readme_line: curl failed" >&2; return 1; }
  printf '%s:%s\t%s\t%s\n' "$readme_file" "$readme_line" "$status" "$body" >>"$READMETEST_DIR/log"
  cat "$body"; echo
  if [ "$status" != "$readme_status" ]; then
    echo "$readme_file:$readme_line: HTTP $status, the file says $readme_status: $(cat "$body")" >&2
    return 1
  fi
}
invledger() {
  local rc=0
  command invledger "$@" || rc=$?
  if [ "$rc" != "${readme_exit:-0}" ]; then
    echo "$readme_file:$readme_line: invledger exited $rc, the file says ${readme_exit:-0}" >&2
    return 1
  fi
}
`

// TestREADMERunsAsWritten runs the runnable shell blocks of README.md and
// docs/*.md (readmeFiles), in order, in one bash session against a serve
// on a private stack, as a reader runs them after `invledger dev`: in the
// directory where dev keeps .invledger/, with its tokens and seal key, in a
// shell that sourced the env file dev wrote and nothing else (no variable
// of the test's own, no INVLEDGER_* of the environment the test ran in).
// Each command must exit 0 (or as its `# → exit N` says); each curl must
// answer the status of its `# → STATUS` annotation, with a JSON answer
// holding each `.key` (equal to its value when `.key=value`). A broken
// example fails here.
func TestREADMERunsAsWritten(t *testing.T) {
	t.Parallel()
	var blocks []readmeBlock
	for _, file := range readmeFiles(t) {
		blocks = append(blocks, readmeBlocks(t, file)...)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", readmeCLIEnv, self)
	if err := os.WriteFile(filepath.Join(bin, "invledger"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}

	var script strings.Builder
	script.WriteString(readmePrelude)
	// What dev's banner tells the reader to run, and README.md's "Running
	// it" and docs/api.md's "Examples" send them to.
	script.WriteString("source .invledger/env\n")
	expect := map[string]readmeCommand{} // by file:line
	ran := 0
	for _, b := range blocks {
		if b.skip != "" {
			continue
		}
		ran++
		for _, c := range readmeCommands(t, b) {
			expect[fmt.Sprintf("%s:%d", c.file, c.line)] = c
			status, exit := c.status, "0"
			if rest, ok := strings.CutPrefix(status, "exit"); ok {
				status, exit = "", strings.TrimSpace(rest)
			}
			fmt.Fprintf(&script, "readme_file=%q readme_line=%d readme_status=%q readme_exit=%s\n%s\n", c.file, c.line, status, exit, c.text)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if ran < 2 {
		t.Fatalf("README.md and docs/*.md have %d runnable blocks; the API and CLI examples should be marked <!-- readme-test: run -->", ran)
	}

	// The markers and annotations are checked above even with -short.
	localstacktest.SkipShort(t)
	devDir := filepath.Join(dir, ".invledger")
	if err := os.Mkdir(devDir, 0o700); err != nil {
		t.Fatal(err)
	}
	tokens, err := devstack.Tokens(devDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{}
	if cfg.SealKeys, err = devstack.SealKeys(devDir); err != nil {
		t.Fatal(err)
	}
	api, stack, _ := startServeStack(t, tokens, func(c *Config) { c.SealKeys = cfg.SealKeys })
	cfg.RedisURL, cfg.DatabaseURL = stack.Redis.URL(), stack.DatabaseURL
	if err := printDevBanner(io.Discard, devDir, cfg, tokens, strings.TrimPrefix(api, "http://")); err != nil {
		t.Fatal(err)
	}
	checkDocsReadOnlyDevEnv(t, filepath.Join(devDir, "env"))
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "READMETEST_DIR=" + dir}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "PATH" && !strings.HasPrefix(name, "INVLEDGER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	close(done)
	if err != nil {
		t.Fatalf("the runnable blocks of README.md and docs/*.md failed: %v\n%s", err, out)
	}

	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		f := strings.Split(rec, "\t")
		at := f[0]
		body, err := os.ReadFile(f[2])
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range expect[at].fields {
			if msg := checkREADMEField(body, field); msg != "" {
				t.Errorf("%s: %s: %s", at, field, msg)
			}
		}
	}
}

// checkDocsReadOnlyDevEnv fails t for each variable an example of docs/*.md
// reads with getenv() (the PHP examples, which the clients/php suite runs)
// that the env file of dev at path does not export.
func checkDocsReadOnlyDevEnv(t *testing.T, path string) {
	t.Helper()
	env, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		reported := map[string]bool{}
		for _, m := range regexp.MustCompile(`getenv\('([A-Z_]+)'\)`).FindAllStringSubmatch(string(b), -1) {
			read++
			if !reported[m[1]] && !regexp.MustCompile(`[ \n]`+m[1]+`=`).Match(env) {
				reported[m[1]] = true
				t.Errorf("docs/%s reads %s, which invledger dev's env file does not export:\n%s", filepath.Base(doc), m[1], env)
			}
		}
	}
	if read == 0 {
		t.Error("no example of docs/*.md reads a variable with getenv(): the PHP examples moved?")
	}
}

// checkREADMEField checks a `.a.b` or `.a.0.b=value` annotation against a
// JSON body, and returns what is wrong, or "".
func checkREADMEField(body []byte, field string) string {
	path, want, hasWant := strings.Cut(strings.TrimPrefix(field, "."), "=")
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Sprintf("the answer is not JSON: %s", body)
	}
	for _, key := range strings.Split(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			val, ok := node[key]
			if !ok {
				return fmt.Sprintf("the answer has no %q: %s", key, body)
			}
			v = val
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) {
				return fmt.Sprintf("the answer has no element %q: %s", key, body)
			}
			v = node[i]
		default:
			return fmt.Sprintf("the answer has no %q: %s", key, body)
		}
	}
	if !hasWant {
		return ""
	}
	got := fmt.Sprint(v)
	if v == nil {
		got = "null"
	}
	if got != want {
		return fmt.Sprintf("is %s, the file says %s: %s", got, want, body)
	}
	return ""
}
