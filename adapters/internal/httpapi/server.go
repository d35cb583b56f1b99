package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/invledger/invledger/adapters/internal/httpapi/requestid"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// Ledger is the purchase path the API drives. *ledger.Service satisfies it.
type Ledger interface {
	CreateSKU(ctx context.Context, cmd ledger.CreateSKUCommand) (domain.SKUDefinition, bool, error)
	Warm(ctx context.Context, sku string) (ledger.WarmResult, error)
	Deduct(ctx context.Context, cmd ledger.DeductCommand) (domain.Receipt, error)
	Release(ctx context.Context, cmd ledger.ReleaseCommand) (domain.ReleaseReceipt, error)
	State(ctx context.Context, sku string) (ledger.SKUView, error)
}

var _ Ledger = (*ledger.Service)(nil)

// SKULister pages through the defined SKUs. *ledger.Catalog satisfies it.
type SKULister interface {
	List(ctx context.Context, q ledger.SKUListQuery) (ledger.SKUPage, error)
}

var _ SKULister = (*ledger.Catalog)(nil)

// Config configures the handler: the application services behind every
// route, the credentials and the limits. Zero limits get defaults
// (setDefaults); every service is required.
type Config struct {
	// Tokens are the bearer credentials; see ParseTokens. At least one,
	// unless TokenSet is given.
	Tokens []Token
	// TokenSet, given instead of Tokens, holds credentials the caller can
	// replace while the handler serves.
	TokenSet *TokenSet
	// Ledger serves the SKU and purchase routes.
	Ledger Ledger
	// Holds serves the hold routes under /v1/skus/{sku}/holds.
	Holds HoldService
	// Orders serves the order routes under /v1/orders.
	Orders OrderService
	// SKUs serves GET /v1/skus.
	SKUs SKULister
	// Closer serves POST /v1/skus/{sku}/close and /retire.
	Closer SKUCloser
	// Auditor serves the read-only audit queries.
	Auditor Auditor
	// Reconciler serves POST /v1/reconcile, Runs GET /v1/reconciliations.
	Reconciler Reconciler
	Runs       RunLister
	// Adjustments serves the approval flow under /v1/adjustments.
	Adjustments AdjustmentFlow
	// DeadLetters serves /v1/dead-letters.
	DeadLetters DeadLetterFlow
	// Webhooks serves /v1/webhooks.
	Webhooks WebhookManager
	// Idempotency keeps the answers of writes sent with an
	// Idempotency-Key that have no natural key of their own.
	Idempotency IdempotencyStore
	// Metrics serves GET /metrics, without a token.
	Metrics http.Handler
	// OnUnavailable, if set, is told of every 503 answer that asks for a
	// retry: the route pattern and the code (unavailable, recovering,
	// unsafe_redis), for a metric.
	OnUnavailable func(route string, code domain.Code)
	// OnPurchase, if set, is told the ledger's answer to every purchase
	// and reserve, by SKU, nil for a sale, so that SKUs refusing as
	// recovering for too long can be reported; it runs on every sale, so
	// it must be cheap.
	OnPurchase func(sku domain.SKUID, err error)
	// OnRequest, if set, is told of every answer: the route pattern
	// (net/http's, "/" for an unknown path), the status and how long it
	// took, for metrics.
	OnRequest func(route string, status int, elapsed time.Duration)
	// Ready is the readiness probe behind GET /readyz: it checks this
	// process's dependencies and says whether it can do its work. The
	// answer lists each dependency as ok or unreachable, never an address
	// or an error text: Ready logs those.
	Ready func(ctx context.Context) Readiness
	// ReadyTimeout bounds one Ready call. Default 2s.
	ReadyTimeout time.Duration
	// Tracer, if set, traces every request: a server span named by its
	// route pattern, continuing the caller's W3C traceparent. Nil (the
	// default, tracing off) costs nothing.
	Tracer trace.Tracer
	// Logger receives server errors (500s, with the real error). Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps a request body on every route; a larger one is 400
	// invalid_request naming "body". Default 64 KiB.
	MaxBodyBytes int64
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Second
	}
}

// Validate reports every problem with the config at once. It expects
// defaults to be applied, as NewHandler does.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.TokenSet != nil && len(c.Tokens) > 0:
		errs = append(errs, errors.New("httpapi: give Config.Tokens or Config.TokenSet, not both"))
	case c.TokenSet == nil:
		if err := ValidateTokens(c.Tokens); err != nil {
			errs = append(errs, fmt.Errorf("httpapi: Config.Tokens: %w", err))
		}
	}
	for _, svc := range []struct {
		name    string
		missing bool
	}{
		{"Ledger", c.Ledger == nil},
		{"Holds", c.Holds == nil},
		{"Orders", c.Orders == nil},
		{"SKUs", c.SKUs == nil},
		{"Closer", c.Closer == nil},
		{"Auditor", c.Auditor == nil},
		{"Reconciler", c.Reconciler == nil},
		{"Runs", c.Runs == nil},
		{"Adjustments", c.Adjustments == nil},
		{"DeadLetters", c.DeadLetters == nil},
		{"Webhooks", c.Webhooks == nil},
		{"Idempotency", c.Idempotency == nil},
		{"Metrics", c.Metrics == nil},
	} {
		if svc.missing {
			errs = append(errs, fmt.Errorf("httpapi: Config.%s is required", svc.name))
		}
	}
	if c.Ready == nil {
		errs = append(errs, errors.New("httpapi: Config.Ready is required: give a func that checks Redis and PostgreSQL"))
	}
	if c.ReadyTimeout <= 0 {
		errs = append(errs, errors.New("httpapi: Config.ReadyTimeout must be positive"))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("httpapi: Config.MaxBodyBytes must be positive"))
	}
	return errors.Join(errs...)
}

type server struct {
	ledger       Ledger
	holds        HoldService
	orders       OrderService
	skus         SKULister
	closer       SKUCloser
	auditor      Auditor
	reconciler   Reconciler
	runs         RunLister
	adjustments  AdjustmentFlow
	deadLetters  DeadLetterFlow
	webhooks     WebhookManager
	idempotency  IdempotencyStore
	metrics      http.Handler
	unavailable  func(route string, code domain.Code)
	onPurchase   func(sku domain.SKUID, err error)
	onRequest    func(route string, status int, elapsed time.Duration)
	tracer       trace.Tracer
	tokens       *TokenSet
	log          *slog.Logger
	maxBody      int64
	ready        func(context.Context) Readiness
	readyTimeout time.Duration
	mux          *http.ServeMux
	methods      map[string][]string // path → methods registered, for 405 answers
}

// NewHandler returns the whole API: every route of routes, over the
// services of cfg. It validates cfg first.
func NewHandler(cfg Config) (http.Handler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tokens := cfg.TokenSet
	if tokens == nil {
		var err error
		if tokens, err = NewTokenSet(cfg.Tokens); err != nil {
			return nil, err
		}
	}
	s := &server{
		ledger:       cfg.Ledger,
		holds:        cfg.Holds,
		orders:       cfg.Orders,
		skus:         cfg.SKUs,
		closer:       cfg.Closer,
		auditor:      cfg.Auditor,
		reconciler:   cfg.Reconciler,
		runs:         cfg.Runs,
		adjustments:  cfg.Adjustments,
		deadLetters:  cfg.DeadLetters,
		webhooks:     cfg.Webhooks,
		idempotency:  cfg.Idempotency,
		metrics:      cfg.Metrics,
		unavailable:  cfg.OnUnavailable,
		onPurchase:   cfg.OnPurchase,
		onRequest:    cfg.OnRequest,
		tracer:       cfg.Tracer,
		tokens:       tokens,
		log:          slog.New(requestid.LogHandler(cfg.Logger.Handler())),
		maxBody:      cfg.MaxBodyBytes,
		ready:        cfg.Ready,
		readyTimeout: cfg.ReadyTimeout,
		mux:          http.NewServeMux(),
		methods:      map[string][]string{},
	}
	s.mount(func(route) bool { return true })
	return s, nil
}

// NewOpsHandler serves only the public routes, GET /healthz, /readyz and
// /metrics, for a process that runs no API (a projector or a reconciler),
// so every process serves its metrics and health. readyTimeout 0 means 2s.
func NewOpsHandler(metrics http.Handler, ready func(ctx context.Context) Readiness, readyTimeout time.Duration, log *slog.Logger) (http.Handler, error) {
	if metrics == nil || ready == nil {
		return nil, errors.New("httpapi: NewOpsHandler needs metrics and ready")
	}
	if readyTimeout == 0 {
		readyTimeout = 2 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	s := &server{metrics: metrics, ready: ready, readyTimeout: readyTimeout, log: log,
		mux: http.NewServeMux(), methods: map[string][]string{}}
	s.mount(func(rt route) bool { return rt.roles == public })
	return s, nil
}

// route is one endpoint: who may call it and what answers it.
type route struct {
	method  string
	path    string  // a net/http pattern path
	roles   roleSet // public: no token needed
	handler http.HandlerFunc
}

// public is the role set of an endpoint that needs no token.
const public roleSet = 0

// routes is the API, every endpoint in one table. Add an endpoint here,
// naming the roles the role matrix gives it.
func (s *server) routes() []route {
	return []route{
		{http.MethodGet, "/healthz", public, s.healthz},
		{http.MethodGet, "/readyz", public, s.readyz},
		{http.MethodGet, "/metrics", public, s.serveMetrics},
		{http.MethodGet, "/v1/openapi.json", public, s.openAPI},

		{http.MethodGet, "/v1/skus", readers, s.listSKUs},
		{http.MethodPut, "/v1/skus/{sku}", operatorOnly, s.idempotent(s.createSKU)},
		{http.MethodGet, "/v1/skus/{sku}", readers, s.getSKU},
		{http.MethodPost, "/v1/skus/{sku}/warm", operatorOnly, s.warm},
		{http.MethodPost, "/v1/skus/{sku}/deduct", gatewayOnly, s.deduct},
		{http.MethodPost, "/v1/skus/{sku}/release", gatewayOnly, s.release},
		{http.MethodPost, "/v1/skus/{sku}/close", operatorOnly, s.closeSKU},
		{http.MethodPost, "/v1/skus/{sku}/retire", operatorOnly, s.retireSKU},
		{http.MethodPost, "/v1/skus/{sku}/holds", gatewayOnly, s.reserve},
		{http.MethodGet, "/v1/skus/{sku}/holds/{hold_id}", holdReaders, s.holdRoute(HoldService.Hold)},
		{http.MethodPost, "/v1/skus/{sku}/holds/{hold_id}/confirm", gatewayOnly, s.holdRoute(HoldService.Confirm)},
		{http.MethodPost, "/v1/skus/{sku}/holds/{hold_id}/cancel", gatewayOnly, s.holdRoute(HoldService.Cancel)},
		{http.MethodPost, "/v1/orders", gatewayOnly, s.placeOrder},
		{http.MethodGet, "/v1/orders/{order_id}", holdReaders, s.orderRoute(OrderService.Order)},
		{http.MethodPost, "/v1/orders/{order_id}/confirm", gatewayOnly, s.orderRoute(OrderService.Confirm)},
		{http.MethodPost, "/v1/orders/{order_id}/cancel", gatewayOnly, s.orderRoute(OrderService.Cancel)},

		{http.MethodGet, "/v1/skus/{sku}/events", readers, s.skuEvents},
		{http.MethodGet, "/v1/skus/{sku}/balance", readers, s.balanceAt},
		{http.MethodGet, "/v1/skus/{sku}/buyers", readers, s.buyers},
		{http.MethodGet, "/v1/skus/{sku}/operations", readers, s.skuOperations},
		{http.MethodGet, "/v1/users/{user_id}/purchases", readers, s.userPurchases},

		{http.MethodPost, "/v1/reconcile", operatorOnly, s.idempotent(s.reconcile)},
		{http.MethodGet, "/v1/reconciliations", readers, s.reconciliations},

		{http.MethodPost, "/v1/adjustments", operatorOnly, s.idempotent(s.requestAdjustment)},
		{http.MethodGet, "/v1/adjustments", readers, s.listAdjustments},
		{http.MethodPost, "/v1/adjustments/{id}/approve", approverOnly, s.approveAdjustment},
		{http.MethodPost, "/v1/adjustments/{id}/reject", approverOnly, s.rejectAdjustment},

		{http.MethodGet, "/v1/dead-letters", operatorOnly, s.listDeadLetters},
		{http.MethodPost, "/v1/dead-letters/{id}/replay", operatorOnly, s.replayDeadLetter},
		{http.MethodPost, "/v1/dead-letters/{id}/resolve", operatorOnly, s.resolveDeadLetter},

		{http.MethodPost, "/v1/webhooks", operatorOnly, s.idempotent(s.createWebhook)},
		{http.MethodGet, "/v1/webhooks", operatorOnly, s.listWebhooks},
		{http.MethodDelete, "/v1/webhooks/{webhook_id}", operatorOnly, s.deleteWebhook},
		{http.MethodPost, "/v1/webhooks/{webhook_id}/rotate", operatorOnly, s.idempotent(s.rotateWebhook)},
	}
}

// serveMetrics defers to Config.Metrics; a method value of the field
// itself would be taken when routes is built, and Routes builds it on an
// empty server.
func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) { s.metrics.ServeHTTP(w, r) }

// mount registers every route, then the JSON answers for a known path
// with another method (405 with Allow) and for an unknown path (404).
func (s *server) mount(include func(route) bool) {
	for _, rt := range s.routes() {
		if include(rt) {
			s.handle(rt.method, rt.path, rt.roles, rt.handler)
		}
	}
	for path, methods := range s.methods {
		allow := strings.Join(methods, ", ")
		if slices.Contains(methods, http.MethodGet) && !slices.Contains(methods, http.MethodHead) {
			allow += ", " + http.MethodHead
		}
		s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			s.writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, r.Method+" is not allowed here; use "+allow)
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, http.StatusNotFound, string(domain.CodeNotFound), "no such endpoint")
	})
}

// handle mounts h at "method path". roles == public needs no token;
// otherwise the request needs a bearer token whose role is in roles. The
// path's parameters are checked after the token, before h.
func (s *server) handle(method, path string, roles roleSet, h http.Handler) {
	h = s.checkPathParams(path, h)
	if roles != public {
		h = s.authorize(method+" "+path, roles, h)
	}
	s.mux.Handle(method+" "+path, h)
	s.methods[path] = append(s.methods[path], method)
}

// authorize answers 401 without a valid token and 403 when the token's role
// is not in roles; otherwise it puts the principal in the context, and its
// name as the actor of every operation the request records.
func (s *server) authorize(pattern string, roles roleSet, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.tokens.Authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="invledger"`)
			s.writeError(w, http.StatusUnauthorized, codeUnauthorized, "a valid Authorization: Bearer <secret> header is required")
			return
		}
		if !roles.has(p.Role) {
			s.writeError(w, http.StatusForbidden, codeForbidden, "role "+string(p.Role)+" may not call "+pattern)
			return
		}
		if tw, ok := w.(*trackedWriter); ok {
			tw.principal = p.Name
		}
		h.ServeHTTP(w, r.WithContext(ledger.WithActor(WithPrincipal(r.Context(), p), p.Name)))
	})
}

// ServeHTTP turns a panic into a logged 500, so no input can crash a
// connection without an answer.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(r)
	w.Header()[wire.HeaderRequestID] = []string{id}
	ctx := requestid.NewContext(r.Context(), id)
	var span trace.Span
	if s.tracer != nil {
		ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span = s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("invledger.request_id", id)))
	}
	r = r.WithContext(ctx)
	tw := &trackedWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { // net/http's own abort: let it through
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "httpapi: panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			s.writeError(tw, http.StatusInternalServerError, string(domain.CodeInternal), detailInternal)
		}
		s.done(r, tw, start)
		if span != nil {
			endSpan(span, r, tw.status)
		}
	}()
	if p := r.URL.EscapedPath(); !cleanPath(p) {
		// ServeMux would answer a redirect to the cleaned path, which no
		// operation describes; no route has such a segment, and no id is
		// one.
		s.writeError(tw, http.StatusBadRequest, string(domain.CodeInvalidInput), "the path has an empty, . or .. segment")
		return
	}
	s.mux.ServeHTTP(tw, r)
}

// cleanPath reports whether p is as ServeMux leaves it: no empty, "." or
// ".." segment, a trailing slash aside.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return p == "*" // OPTIONS *
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// endSpan names a request's span by its route pattern, once the mux
// matched it, and ends it; a 5xx is an error.
func endSpan(span trace.Span, r *http.Request, status int) {
	if r.Pattern != "" {
		span.SetName(r.Pattern)
		span.SetAttributes(attribute.String("http.route", r.Pattern))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// body limits the request body to MaxBodyBytes. A declared length over the
// limit is refused before anything is read.
func (s *server) body(w http.ResponseWriter, r *http.Request) (io.Reader, error) {
	if r.ContentLength > s.maxBody {
		return nil, bodyError("larger than %d bytes", s.maxBody)
	}
	return http.MaxBytesReader(w, r.Body, s.maxBody), nil
}

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeRaw(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// Readiness is the answer of a readiness probe.
type Readiness struct {
	// Ready is whether the process can do its work now.
	Ready bool
	// Checks are the dependencies probed, in the order the body lists them.
	Checks []DependencyCheck
	// Notes are facts the body lists after the checks, such as
	// "redis_config":"assumed".
	Notes []ReadinessNote
}

// ReadinessNote is one name and value the readiness body shows.
type ReadinessNote struct {
	Name, Value string
}

// DependencyCheck is the state of one dependency: OK when it answered.
type DependencyCheck struct {
	Name string
	OK   bool
}

// readyz answers 200 {"status":"ready","redis":"ok",...} when the process
// can work, and 503 {"status":"not_ready","error":"not_ready",...}
// otherwise, listing every dependency as "ok" or "unreachable".
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.readyTimeout)
	defer cancel()
	rd := s.ready(ctx)
	status, b := http.StatusOK, []byte(`{"status":"ready"`)
	if !rd.Ready {
		status, b = http.StatusServiceUnavailable, []byte(`{"status":"`+codeNotReady+`","error":"`+codeNotReady+`"`)
	}
	for _, c := range rd.Checks {
		state := "ok"
		if !c.OK {
			state = "unreachable"
		}
		b = append(b, ',')
		b = appendJSONString(b, c.Name)
		b = append(b, ':')
		b = appendJSONString(b, state)
	}
	for _, n := range rd.Notes {
		b = append(b, ',')
		b = appendJSONString(b, n.Name)
		b = append(b, ':')
		b = appendJSONString(b, n.Value)
	}
	writeRaw(w, status, append(b, '}'))
}

func (s *server) createSKU(w http.ResponseWriter, r *http.Request) {
	body, err := s.body(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd, err := decodeCreateSKU(r.PathValue("sku"), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	def, created, err := s.ledger.CreateSKU(r.Context(), cmd)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.writeJSON(w, status, wire.SKUJSON{SKU: def.SKU().String(), Stock: def.InitialStock(), PerUserLimit: def.PerUserLimit()})
}

func (s *server) warm(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	res, err := s.ledger.Warm(r.Context(), sku)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, wire.WarmJSON{
		SKU: sku, Stock: res.State.Stock, Seq: res.State.Seq, Status: string(res.State.Status), Stocked: res.Stocked,
	})
}

// deduct is the hot path: the body is validated before the ledger is
// called, and the answer is written without reflection.
func (s *server) deduct(w http.ResponseWriter, r *http.Request) {
	body, err := s.body(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd, err := decodeDeduct(r.PathValue("sku"), key, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rc, err := s.ledger.Deduct(r.Context(), cmd)
	if s.onPurchase != nil {
		s.onPurchase(cmd.SKU, err)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rc.Replayed {
		// The body stays the original receipt, byte for byte; what changed
		// since is said in headers.
		w.Header()[wire.HeaderReplayed] = headerTrue
		if rc.Released {
			w.Header()[wire.HeaderReleased] = headerTrue
		}
	}
	bp := getBuf()
	sendBuf(w, http.StatusOK, bp, appendDeductReceipt((*bp)[:0], rc.Seq, rc.Remaining, rc.EventID))
}

// headerTrue is the value "true" of HeaderReplayed and HeaderReleased,
// assigned directly (canonical keys) to save an allocation per replay.
var headerTrue = []string{"true"}

func (s *server) release(w http.ResponseWriter, r *http.Request) {
	body, err := s.body(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The body's request_id names the deduction and makes the release
	// idempotent; an Idempotency-Key is only checked for shape.
	if _, err := idempotencyKey(r); err != nil {
		s.fail(w, r, err)
		return
	}
	cmd, err := decodeRelease(r.PathValue("sku"), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rel, err := s.ledger.Release(r.Context(), cmd)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	bp := getBuf()
	sendBuf(w, http.StatusOK, bp, appendReleaseReceipt((*bp)[:0], rel.EventID, rel.Seq, rel.AlreadyReleased))
}

func (s *server) getSKU(w http.ResponseWriter, r *http.Request) {
	v, err := s.ledger.State(r.Context(), r.PathValue("sku"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, wire.SKUViewJSON{
		SKU:             v.Definition.SKU().String(),
		RedisStock:      v.RedisStock,
		LedgerStock:     v.LedgerStock,
		RedisSeq:        v.RedisSeq,
		LedgerSeq:       v.LedgerSeq,
		LedgerWatermark: v.LedgerWatermark,
		RedisHeld:       v.RedisHeld,
		LedgerHeld:      v.LedgerHeld,
		State:           string(v.Status),
		InitialStock:    v.Definition.InitialStock(),
		PerUserLimit:    v.Definition.PerUserLimit(),
	})
}

// NewSKUPageJSON maps p into its JSON shape, field by field.
func NewSKUPageJSON(p ledger.SKUPage) wire.SKUPageJSON {
	return wire.SKUPageJSON{NextAfter: p.NextAfter, SKUs: mapSlice(p.SKUs, func(v ledger.SKUView) wire.SKUItemJSON {
		return wire.SKUItemJSON{SKU: v.Definition.SKU().String(), InitialStock: v.Definition.InitialStock(),
			PerUserLimit: v.Definition.PerUserLimit(), State: string(v.Status), RedisStock: v.RedisStock,
			RedisSeq: v.RedisSeq, LedgerStock: v.LedgerStock, LedgerSeq: v.LedgerSeq}
	})}
}

// listSKUs is GET /v1/skus?after=SKU&limit=N: the defined SKUs in byte
// order of their ids, {"skus":[...],"next_after":SKU|null}; after is the
// last SKU of the previous page, limit 1-1000, default 100. Redis fields
// are null for a SKU Redis does not hold.
func (s *server) listSKUs(w http.ResponseWriter, r *http.Request) {
	q, limit, err := pageQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.skus.List(r.Context(), ledger.SKUListQuery{After: q.Get("after"), Limit: limit})
	answer(s, w, r, page, err, NewSKUPageJSON)
}
