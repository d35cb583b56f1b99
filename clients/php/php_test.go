// Package php_test runs the PHP client's PHPUnit suite (clients/php/tests)
// against a private stack: a redis-server and a PostgreSQL of their own,
// and a serve process this test binary runs, so the suite can have it
// killed -9 and started again on the same address. It also checks that
// docs/openapi.yaml and the PHP client stay one contract, and that the
// package installs the documented way, with Composer, offline.
//
// PHP, Composer and PHPUnit come from Debian's packages (scripts/install-
// deps.sh); without them the test fails rather than skips, as CI has them.
package php_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/servechild"
	"github.com/invledger/invledger/docs"
)

// childEnv holds the JSON childConfig of a serve child process: TestMain
// runs serveChild instead of the tests when it is set.
const childEnv = "INVLEDGER_PHP_TEST_SERVE_CHILD"

// The tokens of the stack the suite calls.
const (
	gatewaySecret  = "php-gateway-secret-0001"
	operatorSecret = "php-operator-secret-0001"
	tokens         = "php-gw:gateway:" + gatewaySecret + ",php-ops:operator:" + operatorSecret
)

// childConfig is what a serve child process serves.
type childConfig struct {
	RedisURL, DatabaseURL, Listen, DataDir string
}

// cliEnv, set to 1, makes the test binary run as the invledger CLI: the
// suite's docs test runs docs/php.md's commands with a script named
// invledger that runs this binary so, which spares a go build.
const cliEnv = "INVLEDGER_PHP_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(cli.Main(cli.NewRootCmd()))
	}
	if code, child := servechild.Main(childEnv, serveChild); child {
		os.Exit(code)
	}
	localstacktest.Main(m)
}

// serveChild runs every component, as `invledger serve` does; servechild.Main
// runs it until SIGTERM or a kill.
func serveChild(ctx context.Context, cc childConfig, log *slog.Logger, listening func(addr string)) error {
	// A stalled Redis is a 503 after a second, not the default two, so
	// that the suite's stall costs little.
	a, err := app.New(ctx, app.Config{RedisURL: cc.RedisURL, DatabaseURL: cc.DatabaseURL, Logger: log,
		RedisTimeout: time.Second})
	if err != nil {
		return err
	}
	defer a.Close()
	// Closed SKUs are archived and retired within a second, so that the
	// suite meets the refusal of a release on a retired SKU.
	return server.Serve(ctx, a, server.Config{Listen: cc.Listen, Tokens: tokens, DataDir: cc.DataDir,
		ReconcileInterval: 500 * time.Millisecond, ArchiveAfter: time.Millisecond, RetireAfter: time.Millisecond,
		OnListening: listening})
}

// serveProc is the serve child of the moment, which control kills -9 and
// starts again on the same address.
type serveProc struct {
	cfg   childConfig
	mu    sync.Mutex
	child *servechild.Process
}

// start runs a serve child on p.cfg.Listen and waits until it listens.
func (p *serveProc) start() error {
	var stderr localstacktest.SyncBuffer
	child, err := servechild.Start(childEnv, p.cfg, &stderr)
	if err != nil {
		return err
	}
	if _, err := child.WaitListening(30 * time.Second); err != nil {
		return fmt.Errorf("%w\n%s", err, stderr.String())
	}
	p.mu.Lock()
	p.child = child
	p.mu.Unlock()
	return nil
}

// kill ends the serve child with SIGKILL (no graceful stop) and waits
// until it is gone; it returns the pid it killed.
func (p *serveProc) kill() int {
	p.mu.Lock()
	child := p.child
	p.mu.Unlock()
	if child == nil {
		return 0
	}
	return child.Kill()
}

// control serves the suite's requests to break the stack: POST
// /kill-serve kills serve at once, answers the pid, and starts a new serve
// on the same address after ?down= (a duration), so the clients' retries in
// between meet a refused connection. GET /serve-pid answers the current
// pid. POST /pause-redis freezes Redis (SIGSTOP) for ?for= (a duration),
// so that serve answers 503.
func (p *serveProc) control(t *testing.T, redis *localstack.RedisServer) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var restarts sync.WaitGroup // the restarts and resumes under way
	mux := http.NewServeMux()
	mux.HandleFunc("POST /kill-serve", func(w http.ResponseWriter, r *http.Request) {
		down, err := time.ParseDuration(r.URL.Query().Get("down"))
		if err != nil || down < 0 || down > 10*time.Second {
			http.Error(w, "down: a duration of at most 10s", http.StatusBadRequest)
			return
		}
		pid := p.kill()
		restarts.Add(1)
		go func() {
			defer restarts.Done()
			time.Sleep(down)
			if err := p.start(); err != nil {
				t.Errorf("start serve again after the kill: %v", err)
			}
		}()
		_ = json.NewEncoder(w).Encode(map[string]int{"killed": pid})
	})
	mux.HandleFunc("POST /pause-redis", func(w http.ResponseWriter, r *http.Request) {
		stall, err := time.ParseDuration(r.URL.Query().Get("for"))
		if err != nil || stall < 0 || stall > 10*time.Second {
			http.Error(w, "for: a duration of at most 10s", http.StatusBadRequest)
			return
		}
		if err := redis.Pause(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		restarts.Add(1)
		go func() {
			defer restarts.Done()
			time.Sleep(stall)
			if err := redis.Resume(); err != nil {
				t.Errorf("resume redis: %v", err)
			}
		}()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /serve-pid", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		pid := p.child.Pid()
		p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]int{"pid": pid})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		restarts.Wait()
	})
	return "http://" + ln.Addr().String()
}

// tools returns the paths of php, phpunit and composer, failing t when one
// is missing: scripts/install-deps.sh installs them.
func tools(t *testing.T) (php, phpunit, composer string) {
	t.Helper()
	var missing []string
	look := func(name string) string {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
		}
		return p
	}
	php, phpunit, composer = look("php"), look("phpunit"), look("composer")
	if len(missing) > 0 {
		t.Fatalf("%s not installed: run scripts/install-deps.sh (Debian's php8.2-cli, php8.2-curl, composer, phpunit, php-guzzlehttp-guzzle, php-laravel-framework)",
			strings.Join(missing, ", "))
	}
	return php, phpunit, composer
}

// composerEnv is the environment of an offline Composer run with its own
// home under dir: Composer reaches no network and no user's settings.
func composerEnv(dir string) []string {
	return append(os.Environ(), "COMPOSER_HOME="+filepath.Join(dir, "composer-home"), "COMPOSER_CACHE_DIR=/dev/null",
		"COMPOSER_ALLOW_SUPERUSER=1", "COMPOSER_DISABLE_NETWORK=1", "COMPOSER_NO_INTERACTION=1")
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPHPClientAgainstARealStack runs the PHPUnit suite against a private
// stack, then installs the package as docs/php.md says and buys with it.
func TestPHPClientAgainstARealStack(t *testing.T) {
	localstacktest.SkipShort(t)
	php, phpunit, composer := tools(t)
	ctx := context.Background()
	stack := localstacktest.Stack(t)
	if err := app.Migrate(ctx, stack.DatabaseURL, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	sp := &serveProc{cfg: childConfig{RedisURL: stack.Redis.URL(), DatabaseURL: stack.DatabaseURL, Listen: addr, DataDir: t.TempDir()}}
	if err := sp.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.kill() })
	control := sp.control(t, stack.Redis)

	pkg, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	env := append(composerEnv(work), "COMPOSER_VENDOR_DIR="+filepath.Join(work, "vendor"))
	run(t, pkg, env, composer, "dump-autoload")
	env = append(env,
		"INVLEDGER_PHP_AUTOLOAD="+filepath.Join(work, "vendor", "autoload.php"),
		"INVLEDGER_TEST_URL=http://"+addr,
		"INVLEDGER_TEST_GATEWAY_TOKEN="+gatewaySecret,
		"INVLEDGER_TEST_OPERATOR_TOKEN="+operatorSecret,
		"INVLEDGER_TEST_CONTROL="+control,
		"INVLEDGER_TEST_DOCS="+filepath.Join(pkg, "..", "..", "docs", "php.md"),
		// What `source .invledger/env` gives a reader of a dev stack, for
		// the docs test's commands and examples: the stores' URLs the CLI
		// reads, and the invledger command.
		"INVLEDGER_TEST_REDIS_URL="+stack.Redis.URL(),
		"INVLEDGER_TEST_DATABASE_URL="+stack.DatabaseURL,
		"INVLEDGER_TEST_CLI_DIR="+cliDir(t),
	)
	start := time.Now()
	cmd := exec.Command(phpunit, "--configuration", filepath.Join(pkg, "phpunit.xml"))
	cmd.Dir, cmd.Env = pkg, env
	out, err := cmd.CombinedOutput()
	t.Logf("phpunit (%s):\n%s", time.Since(start).Round(10*time.Millisecond), out)
	if err != nil {
		t.Fatalf("phpunit: %v", err)
	}

	t.Run("InstallsFromTheZipOfMakePHPPackage", func(t *testing.T) {
		installFromZip(t, php, composer, "http://"+addr)
	})
}

// cliDir returns a directory holding a script named invledger that runs
// this test binary as the CLI.
func cliDir(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", cliEnv, self)
	if err := os.WriteFile(filepath.Join(dir, "invledger"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// installFromZip builds the package's zip as `make php-package` does,
// installs it into a new project from a Composer artifact repository with
// no network, and buys one unit with it.
func installFromZip(t *testing.T, php, composer, api string) {
	dir := t.TempDir()
	zips := filepath.Join(dir, "artifacts")
	run(t, filepath.Join("..", ".."), composerEnv(dir), "scripts/php-package.sh", zips)
	project := filepath.Join(dir, "shop")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "docs", "php.md"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := regexp.MustCompile("(?s)<!-- composer.json of a shop with Debian's PHP packages -->\\s*```json\n(.*?)```").FindSubmatch(example)
	if manifest == nil {
		t.Fatal("docs/php.md lacks the composer.json of a shop with Debian's PHP packages")
	}
	shopJSON := strings.ReplaceAll(string(manifest[1]), "/path/to/invledger/bin/php", zips)
	if err := os.WriteFile(filepath.Join(project, "composer.json"), []byte(shopJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, project, composerEnv(dir), composer, "install")
	script := `<?php
require __DIR__ . '/vendor/autoload.php';
$inv = \Invledger\Client::create(getenv('INVLEDGER_URL'), getenv('INVLEDGER_TOKEN'));
$r = $inv->deduct('installed-sku', 'installer', 1, 'installed-1');
echo "seq={$r->seq} remaining={$r->remaining}\n";
`
	if err := os.WriteFile(filepath.Join(project, "buy.php"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	operator(t, api, http.MethodPut, "/v1/skus/installed-sku", `{"stock":5,"per_user_limit":1}`)
	operator(t, api, http.MethodPost, "/v1/skus/installed-sku/warm", "")
	out := run(t, project, append(os.Environ(), "INVLEDGER_URL="+api, "INVLEDGER_TOKEN="+gatewaySecret), php, "buy.php")
	if out != "seq=2 remaining=4\n" { // seq 1 is the warm's stocking
		t.Fatalf("the installed package bought: %q, want seq=2 remaining=4", out)
	}
}

// operator makes one operator call, failing t unless it answers 2xx.
func operator(t *testing.T, api, method, path, body string) {
	t.Helper()
	req, err := http.NewRequest(method, api+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+operatorSecret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
}

// TestEveryGatewayOperationAndErrorCodeHasItsPHPCounterpart fails when
// docs/openapi.yaml has an operation a gateway token may call without a
// public method of Invledger\Client of its operationId's name, or an error
// code without its exception class in Invledger\Exception and its entry in
// InvledgerException::BY_CODE.
func TestEveryGatewayOperationAndErrorCodeHasItsPHPCounterpart(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	client, err := os.ReadFile(filepath.Join("src", "Client.php"))
	if err != nil {
		t.Fatal(err)
	}
	var ops int
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			roles, _ := op.Extensions["x-invledger-roles"].([]any)
			for _, r := range roles {
				if r != "gateway" {
					continue
				}
				ops++
				if !regexp.MustCompile(`(?m)^    public function ` + regexp.QuoteMeta(op.OperationID) + `\(`).Match(client) {
					t.Errorf("%s %s (operationId %s) is a gateway operation without Client::%s() in clients/php/src/Client.php",
						method, path, op.OperationID, op.OperationID)
				}
			}
		}
	}
	if ops < 10 {
		t.Fatalf("found %d gateway operations in docs/openapi.yaml; the x-invledger-roles extension moved?", ops)
	}
	base, err := os.ReadFile(filepath.Join("src", "Exception", "InvledgerException.php"))
	if err != nil {
		t.Fatal(err)
	}
	codes := doc.Components.Schemas["Error"].Value.Properties["error"].Value.Enum
	if len(codes) < 20 {
		t.Fatalf("found %d error codes in the Error schema's enum; it moved?", len(codes))
	}
	for _, c := range codes {
		code := c.(string)
		class := pascal(code) + "Exception"
		if _, err := os.Stat(filepath.Join("src", "Exception", class+".php")); err != nil {
			t.Errorf("error code %s has no Invledger\\Exception\\%s (clients/php/src/Exception/%s.php)", code, class, class)
		}
		if !strings.Contains(string(base), fmt.Sprintf("'%s' => %s::class,", code, class)) {
			t.Errorf("error code %s is not mapped to %s in InvledgerException::BY_CODE", code, class)
		}
	}
}

// pascal turns an error code into its class name's stem: sold_out -> SoldOut.
func pascal(code string) string {
	var b strings.Builder
	for _, part := range strings.Split(code, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
