// Package httpapi is the HTTP adapter over the ledger service: JSON in and
// out, bearer-token auth with the DESIGN's role matrix, and the mapping of
// domain errors onto status codes. It holds no business rules of its own;
// it only decodes, authorizes, calls the ledger and encodes.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// Ledger is the application port the API drives. *ledger.Service satisfies it.
type Ledger interface {
	CreateSKU(ctx context.Context, cmd ledger.CreateSKUCommand) (domain.SKUDefinition, bool, error)
	Warm(ctx context.Context, sku string) (ledger.WarmResult, error)
	Deduct(ctx context.Context, cmd ledger.DeductCommand) (domain.Receipt, error)
	Release(ctx context.Context, cmd ledger.ReleaseCommand) (domain.ReleaseReceipt, error)
	State(ctx context.Context, sku string) (ledger.SKUView, error)
}

var _ Ledger = (*ledger.Service)(nil)

// Route is an extra endpoint mounted beside the built-in ones, e.g.
// GET /metrics. Exactly one of Public and Roles must be set, so an endpoint
// never becomes public by omission.
type Route struct {
	Method  string // e.g. http.MethodGet
	Path    string // a net/http pattern path, e.g. "/metrics" or "/v1/adjustments/{id}/approve"
	Roles   []Role // roles allowed; the principal is in the request context (PrincipalFrom)
	Public  bool   // no token needed
	Handler http.Handler
}

// Config configures the handler. Zero values get defaults (setDefaults).
type Config struct {
	// Tokens are the bearer credentials; see ParseTokens. At least one.
	Tokens []Token
	// Ready is the readiness probe behind GET /readyz: it should ping Redis
	// and PostgreSQL and return an error saying which one failed. Required.
	Ready func(ctx context.Context) error
	// ReadyTimeout bounds one Ready call. Default 2s.
	ReadyTimeout time.Duration
	// Logger receives server errors (500s, with the real error). Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; a larger one is 400 invalid_request
	// naming "body". Default 64 KiB.
	MaxBodyBytes int64
	// Routes are extra endpoints to mount.
	Routes []Route
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
	if err := ValidateTokens(c.Tokens); err != nil {
		errs = append(errs, fmt.Errorf("httpapi: Config.Tokens: %w", err))
	}
	if c.Ready == nil {
		errs = append(errs, errors.New("httpapi: Config.Ready is required: give a func that pings Redis and PostgreSQL"))
	}
	if c.ReadyTimeout <= 0 {
		errs = append(errs, errors.New("httpapi: Config.ReadyTimeout must be positive"))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("httpapi: Config.MaxBodyBytes must be positive"))
	}
	for i, rt := range c.Routes {
		where := fmt.Sprintf("httpapi: Config.Routes[%d] (%s %s)", i, rt.Method, rt.Path)
		if rt.Method == "" || strings.ContainsAny(rt.Method, " /") {
			errs = append(errs, fmt.Errorf("%s: Method must be an HTTP method such as GET", where))
		}
		if !strings.HasPrefix(rt.Path, "/") {
			errs = append(errs, fmt.Errorf("%s: Path must start with /", where))
		}
		if rt.Handler == nil {
			errs = append(errs, fmt.Errorf("%s: Handler is required", where))
		}
		if rt.Public == (len(rt.Roles) > 0) {
			errs = append(errs, fmt.Errorf("%s: set exactly one of Public and Roles", where))
		}
		for _, r := range rt.Roles {
			if !r.Valid() {
				errs = append(errs, fmt.Errorf("%s: unknown role %q", where, r))
			}
		}
	}
	return errors.Join(errs...)
}

type server struct {
	ledger       Ledger
	tokens       *Tokens
	log          *slog.Logger
	maxBody      int64
	ready        func(context.Context) error
	readyTimeout time.Duration
	mux          *http.ServeMux
	methods      map[string][]string // path → methods registered, for 405 answers
}

// NewHandler returns the API over l. It validates cfg first.
func NewHandler(l Ledger, cfg Config) (http.Handler, error) {
	cfg.setDefaults()
	err := cfg.Validate()
	if l == nil {
		err = errors.Join(errors.New("httpapi: NewHandler needs a Ledger"), err)
	}
	if err != nil {
		return nil, err
	}
	tokens, err := NewTokens(cfg.Tokens)
	if err != nil {
		return nil, err
	}
	s := &server{
		ledger:       l,
		tokens:       tokens,
		log:          cfg.Logger,
		maxBody:      cfg.MaxBodyBytes,
		ready:        cfg.Ready,
		readyTimeout: cfg.ReadyTimeout,
		mux:          http.NewServeMux(),
		methods:      map[string][]string{},
	}
	if err := s.routes(cfg.Routes); err != nil {
		return nil, err
	}
	return s, nil
}

// routes mounts every endpoint. Add built-in endpoints here: one s.handle
// call each, naming the roles the DESIGN's table gives them.
func (s *server) routes(extra []Route) (err error) {
	defer func() { // ServeMux panics on a malformed or conflicting pattern
		if v := recover(); v != nil {
			err = fmt.Errorf("httpapi: mount routes: %v", v)
		}
	}()
	s.handle(http.MethodGet, "/healthz", 0, http.HandlerFunc(s.healthz))
	s.handle(http.MethodGet, "/readyz", 0, http.HandlerFunc(s.readyz))

	s.handle(http.MethodPut, "/v1/skus/{sku}", operatorOnly, http.HandlerFunc(s.createSKU))
	s.handle(http.MethodGet, "/v1/skus/{sku}", readers, http.HandlerFunc(s.getSKU))
	s.handle(http.MethodPost, "/v1/skus/{sku}/warm", operatorOnly, http.HandlerFunc(s.warm))
	s.handle(http.MethodPost, "/v1/skus/{sku}/deduct", gatewayOnly, http.HandlerFunc(s.deduct))
	s.handle(http.MethodPost, "/v1/skus/{sku}/release", gatewayOnly, http.HandlerFunc(s.release))

	for _, rt := range extra {
		s.handle(rt.Method, rt.Path, rolesOf(rt.Roles...), rt.Handler)
	}

	// A known path with another method: 405 with Allow, in JSON.
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
		s.writeError(w, http.StatusNotFound, codeNotFound, "no such endpoint")
	})
	return nil
}

// handle mounts h at "method path". roles == 0 makes the endpoint public;
// otherwise the request needs a bearer token whose role is in roles.
func (s *server) handle(method, path string, roles roleSet, h http.Handler) {
	if roles != 0 {
		h = s.authorize(method+" "+path, roles, h)
	}
	s.mux.Handle(method+" "+path, h)
	s.methods[path] = append(s.methods[path], method)
}

// authorize answers 401 without a valid token and 403 when the token's role
// is not in roles; otherwise it puts the principal in the context.
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
		h.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// ServeHTTP turns a panic into a logged 500, so no input can crash a
// connection without an answer.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { // net/http's own abort: let it through
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "httpapi: panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			s.writeError(w, http.StatusInternalServerError, codeInternal, detailInternal)
		}
	}()
	s.mux.ServeHTTP(w, r)
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

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.readyTimeout)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		s.log.WarnContext(ctx, "httpapi: not ready", "err", err)
		s.writeError(w, http.StatusServiceUnavailable, codeNotReady, firstLine(err.Error()))
		return
	}
	writeRaw(w, http.StatusOK, []byte(`{"status":"ready"}`))
}

// skuJSON is a SKU definition as PUT /v1/skus/{sku} returns it.
type skuJSON struct {
	SKU          string `json:"sku"`
	Stock        int64  `json:"stock"`
	PerUserLimit int64  `json:"per_user_limit"`
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
	s.writeJSON(w, status, skuJSON{SKU: def.SKU().String(), Stock: def.InitialStock(), PerUserLimit: def.PerUserLimit()})
}

// warmJSON is the answer of POST /v1/skus/{sku}/warm. Stocked is false when
// the SKU was already live and nothing changed.
type warmJSON struct {
	SKU     string `json:"sku"`
	Stock   int64  `json:"stock"`
	Seq     int64  `json:"seq"`
	Status  string `json:"status"`
	Stocked bool   `json:"stocked"`
}

func (s *server) warm(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	res, err := s.ledger.Warm(r.Context(), sku)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, warmJSON{
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
	cmd, err := decodeDeduct(r.PathValue("sku"), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rc, err := s.ledger.Deduct(r.Context(), cmd)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	bp := getBuf()
	sendBuf(w, http.StatusOK, bp, appendDeductReceipt((*bp)[:0], rc.Seq, rc.Remaining, rc.EventID))
}

func (s *server) release(w http.ResponseWriter, r *http.Request) {
	body, err := s.body(w, r)
	if err != nil {
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

// skuViewJSON is GET /v1/skus/{sku}: null where a side does not know yet
// (Redis before warm, the ledger before the first projection).
type skuViewJSON struct {
	SKU          string `json:"sku"`
	RedisStock   *int64 `json:"redis_stock"`
	LedgerStock  *int64 `json:"ledger_stock"`
	RedisSeq     *int64 `json:"redis_seq"`
	LedgerSeq    *int64 `json:"ledger_seq"`
	State        string `json:"state"`
	InitialStock int64  `json:"initial_stock"`
	PerUserLimit int64  `json:"per_user_limit"`
}

func (s *server) getSKU(w http.ResponseWriter, r *http.Request) {
	v, err := s.ledger.State(r.Context(), r.PathValue("sku"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, skuViewJSON{
		SKU:          v.Definition.SKU().String(),
		RedisStock:   v.RedisStock,
		LedgerStock:  v.LedgerStock,
		RedisSeq:     v.RedisSeq,
		LedgerSeq:    v.LedgerSeq,
		State:        string(v.Status),
		InitialStock: v.Definition.InitialStock(),
		PerUserLimit: v.Definition.PerUserLimit(),
	})
}
