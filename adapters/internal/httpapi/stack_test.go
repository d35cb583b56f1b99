package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

// Secrets of the test tokens, one principal per role.
const (
	secretGateway  = "gateway-secret-000001"
	secretOperator = "operator-secret-00001"
	secretApprover = "approver-secret-00001"
	secretAuditor  = "auditor-secret-000001"
	secretBad      = "not-a-known-secret-01"
)

var testTokens = []Token{
	{Name: "storefront", Role: RoleGateway, Secret: secretGateway},
	{Name: "olga", Role: RoleOperator, Secret: secretOperator},
	{Name: "adam", Role: RoleApprover, Secret: secretApprover},
	{Name: "audrey", Role: RoleAuditor, Secret: secretAuditor},
}

// stack is the API over the real thing: a private redis-server and a fresh
// PostgreSQL database with migrations applied, wired as cmd/ will wire them.
type stack struct {
	srv    *httptest.Server
	client *http.Client
	rdb    *redis.Client
	pool   *pgxpool.Pool
	keys   redisinventory.Keyspace
	svc    *ledger.Service
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newStack(t testing.TB) *stack {
	t.Helper()
	ls := stacktest.New(t)
	if _, err := approot.Of(ls.App).Adapters.Inventory.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return serveStack(t, ls)
}

// serveStack serves the API over ls with the real ledger, closer and
// auditor; the reconciler and the adjustment flow are stubs.
func serveStack(t testing.TB, ls *stacktest.Stack) *stack {
	t.Helper()
	h, err := NewHandler(stubbed(t, Config{
		Ledger:  ls.Service,
		Closer:  ls.Archiver(t),
		Auditor: ls.App.Auditor,
		Ready: func(ctx context.Context) Readiness {
			redisOK, pgOK := ls.RedisClient.Ping(ctx).Err() == nil, ls.Pool.Ping(ctx) == nil
			return Readiness{Ready: redisOK, Checks: []DependencyCheck{{"redis", redisOK}, {"postgres", pgOK}}}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 512
	t.Cleanup(tr.CloseIdleConnections)
	return &stack{srv: srv, client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		rdb: ls.RedisClient, pool: ls.Pool, keys: approot.Of(ls.App).Keys, svc: ls.Service}
}

// unused stands in for every service a test does not reach: a call panics,
// which the handler answers with 500.
type unused struct {
	Ledger
	SKUCloser
	Auditor
	Reconciler
	RunLister
	AdjustmentFlow
}

// unusedHolds is unused for the hold service.
type unusedHolds struct {
	HoldService
}

// unusedOrders is unused for the order service, whose Confirm and Cancel
// would be ambiguous beside HoldService's.
type unusedOrders struct {
	OrderService
}

// unusedDeadLetters is unused for the dead-letter flow, whose List would
// be ambiguous beside AdjustmentFlow's.
type unusedDeadLetters struct {
	DeadLetterFlow
}

// unusedIdempotency is unused for the idempotency store, whose Release
// would be ambiguous beside Ledger's.
type unusedIdempotency struct {
	IdempotencyStore
}

// stubbed completes cfg for a test: the test tokens and logger, a probe
// that is always ready, and unused for every service left nil.
func stubbed(t testing.TB, cfg Config) Config {
	var u unused
	if cfg.Tokens == nil {
		cfg.Tokens = testTokens
	}
	if cfg.Ready == nil {
		cfg.Ready = func(context.Context) Readiness { return Readiness{Ready: true} }
	}
	cfg.Logger = testLogger(t)
	if cfg.Ledger == nil {
		cfg.Ledger = u
	}
	if cfg.Holds == nil {
		cfg.Holds = unusedHolds{}
	}
	if cfg.Orders == nil {
		cfg.Orders = unusedOrders{}
	}
	if cfg.SKUs == nil {
		cfg.SKUs = struct{ SKULister }{} // apart from unused: AdjustmentFlow has a List too
	}
	if cfg.Closer == nil {
		cfg.Closer = u
	}
	if cfg.Auditor == nil {
		cfg.Auditor = u
	}
	if cfg.Reconciler == nil {
		cfg.Reconciler = u
	}
	if cfg.Runs == nil {
		cfg.Runs = u
	}
	if cfg.Adjustments == nil {
		cfg.Adjustments = u
	}
	if cfg.DeadLetters == nil {
		cfg.DeadLetters = unusedDeadLetters{}
	}
	if cfg.Webhooks == nil {
		cfg.Webhooks = struct{ WebhookManager }{} // its List and Delete are ambiguous beside others'
	}
	if cfg.Idempotency == nil {
		cfg.Idempotency = unusedIdempotency{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = http.NotFoundHandler()
	}
	return cfg
}

// response is one answer of the API.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends method path (already escaped) with body ("" sends none) and the
// bearer secret ("" sends no Authorization header).
func (s *stack) do(t testing.TB, method, path, secret, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return s.doReader(t, method, path, secret, rd)
}

func (s *stack) doReader(t testing.TB, method, path, secret string, body io.Reader) response {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// mustCreateWarm defines and warms a SKU through the API.
func (s *stack) mustCreateWarm(t testing.TB, sku, body string) {
	t.Helper()
	if r := s.do(t, http.MethodPut, "/v1/skus/"+sku, secretOperator, body); r.status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", sku, r.status, r.body)
	}
	if r := s.do(t, http.MethodPost, "/v1/skus/"+sku+"/warm", secretOperator, ""); r.status != http.StatusOK {
		t.Fatalf("warm %s: %d %s", sku, r.status, r.body)
	}
}
