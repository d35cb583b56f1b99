package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/securecookie"

	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// Prefix is where serve mounts the console, and Root its entry page.
const (
	Prefix = "/console/"
	Root   = "/console"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Health is what the Health page shows besides the readiness probe.
type Health struct {
	Redis, Postgres bool
	// Durability is the configured durability mode (strict, everysec).
	Durability string
	// Partitions is the projector's lag on each partition stream.
	Partitions []PartitionLag
	// DeadLetters counts the open dead letters; -1 when unknown.
	DeadLetters int
	// DeadLettersMore says there are more than DeadLetters.
	DeadLettersMore bool
	// Exports is the broker export's lag per broker that ever confirmed
	// an event; nil when there is none or PostgreSQL is unreachable.
	Exports []ExportLag
}

// ExportLag is how far the broker export to one broker is behind the
// ledger, read from its cursors: any process can show it, whichever one
// exports.
type ExportLag struct {
	Broker string
	// Events is how many ledger events the broker has not confirmed.
	Events int64
	// LastConfirmed is when the export last recorded a confirmation.
	LastConfirmed time.Time
}

// PartitionLag is the projector's backlog on one partition stream, in
// stream entries as Redis counts them (XINFO GROUPS), not events: an entry
// of a batch.lua call holds several events, and counting them would mean
// reading the backlog.
type PartitionLag struct {
	Stream  string
	Lag     int64 // entries not yet delivered to the projector
	Pending int64 // delivered, not yet acknowledged
}

// Config is what the console needs. Every field but the durations and
// Logger is required.
type Config struct {
	// API is the /v1 handler. Every page asks it, in-process, with the
	// signed-in user's own token, so the role matrix and every rule (such
	// as nobody approving their own request) are the API's.
	API http.Handler
	// Tokens checks a pasted token as the API does.
	Tokens *httpapi.TokenSet
	// Sessions records sign-ins and sign-outs.
	Sessions SessionStore
	// Key signs and encrypts the session cookie; every process behind one
	// balancer needs the same, at least MinKeyLen bytes.
	Key []byte
	// SecureCookie marks the cookie Secure even when this process sees
	// plain HTTP (TLS ended at a proxy). Requests over TLS always get it.
	SecureCookie bool
	// IdleTimeout signs a session out after no page was opened or form sent
	// for this long. Default 15m.
	IdleTimeout time.Duration
	// MaxAge bounds a session whatever its use. Default 12h.
	MaxAge time.Duration
	// Follow calls fn with each event of partition stream p as Redis
	// appends it, until ctx ends: the live tail (eventtail.Follow), one
	// reader per partition with a watched SKU.
	Follow func(ctx context.Context, p int, fn func(domain.Event) error) error
	// Partition is the partition stream of a SKU's events.
	Partition func(sku string) int
	// FeedLimits cap the live feeds; a zero field takes its default.
	FeedLimits FeedLimits
	// State reads a SKU's figures in Redis and the ledger, once a second
	// per watched SKU.
	State func(ctx context.Context, sku string) (ledger.SKUView, error)
	// Health reads what the Health page shows.
	Health func(ctx context.Context) Health
	// Refusals reads a SKU's refused purchases by reason, as every serve
	// process counted them (adapters/internal/redis/refusals): once a second per watched
	// SKU, and once per SKU page.
	Refusals func(ctx context.Context, sku string) (map[string]int64, error)
	// LiftDeadlines frees one response from the server's read and write
	// timeouts, for the live feed. Default: http.ResponseController's
	// SetReadDeadline and SetWriteDeadline with no deadline (a read
	// deadline passing while the feed runs would cancel its request).
	LiftDeadlines func(w http.ResponseWriter) error
	// SignInFailed is told of every refused sign-in, with its reason
	// (SignInBadToken, SignInGatewayToken, SignInThrottled), for a metric.
	SignInFailed func(reason string)
	Logger       *slog.Logger
}

// FeedLimits cap the live feeds of one process, each a connection held
// open: in all, so most of the connection cap stays for purchases, and per
// session and per principal (role and name), so one user cannot take them
// all. A feed over the total is answered 503, over the others 429. The
// defaults (for a zero field): 256 in all, 4 a session, 8 a principal; a
// user watches a few SKUs.
type FeedLimits struct {
	Total, PerSession, PerPrincipal int
}

// Reasons a sign-in is refused, as Config.SignInFailed gets them.
const (
	SignInBadToken     = "bad_token"
	SignInGatewayToken = "gateway_token"
	SignInThrottled    = "throttled"
)

func (c *Config) setDefaults() {
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 15 * time.Minute
	}
	if c.MaxAge == 0 {
		c.MaxAge = 12 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for _, d := range []struct {
		field *int
		def   int
	}{{&c.FeedLimits.Total, 256}, {&c.FeedLimits.PerSession, 4}, {&c.FeedLimits.PerPrincipal, 8}} {
		if *d.field == 0 {
			*d.field = d.def
		}
	}
	if c.SignInFailed == nil {
		c.SignInFailed = func(string) {}
	}
	if c.LiftDeadlines == nil {
		c.LiftDeadlines = func(w http.ResponseWriter) error {
			rc := http.NewResponseController(w)
			return errors.Join(rc.SetReadDeadline(time.Time{}), rc.SetWriteDeadline(time.Time{}))
		}
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"API", c.API == nil}, {"Tokens", c.Tokens == nil}, {"Sessions", c.Sessions == nil},
		{"Follow", c.Follow == nil}, {"Partition", c.Partition == nil}, {"State", c.State == nil}, {"Health", c.Health == nil}, {"Refusals", c.Refusals == nil},
	} {
		if f.missing {
			errs = append(errs, fmt.Errorf("console: Config.%s is required", f.name))
		}
	}
	if len(c.Key) < MinKeyLen {
		errs = append(errs, fmt.Errorf("--console-key: %d bytes; at least %d are required", len(c.Key), MinKeyLen))
	}
	if l := c.FeedLimits; l.Total < 1 || l.PerSession < 1 || l.PerPrincipal < 1 {
		errs = append(errs, fmt.Errorf("console: every FeedLimits field must be at least 1, got %+v", l))
	}
	if c.IdleTimeout < time.Second {
		errs = append(errs, errors.New("--console-idle-timeout: must be at least 1s"))
	}
	if c.MaxAge < c.IdleTimeout {
		errs = append(errs, errors.New("console: MaxAge must be at least IdleTimeout"))
	}
	return errors.Join(errs...)
}

// Console is the operator's console: server-rendered pages under Prefix.
type Console struct {
	cfg   Config
	codec *securecookie.SecureCookie
	pages map[string]*template.Template
	hub   *hub
	mux   *http.ServeMux
	// handler is mux with the API's request id and access line.
	handler  http.Handler
	throttle *throttle
}

// New validates cfg and builds the console. Close stops its live readers.
func New(cfg Config) (*Console, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	codec, err := newCodec(cfg.Key, cfg.IdleTimeout)
	if err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, codec: codec, pages: pages, mux: http.NewServeMux(), throttle: newThrottle()}
	c.hub = newHub(cfg)
	c.routes()
	c.handler = httpapi.AccessLog(cfg.Logger, c.mux)
	return c, nil
}

// Close stops the live readers; open feeds end.
func (c *Console) Close() { c.hub.close() }

// route is one console endpoint, its path as docs/openapi.yaml writes it.
type route struct {
	method, path string
	handler      http.Handler
}

// table is every console endpoint: Routes lists it for the description's
// test, routes mounts it.
func (c *Console) table() []route {
	assets, _ := fs.Sub(assetFS, "assets")
	static := http.StripPrefix(Prefix+"assets/", http.FileServerFS(assets))
	return []route{
		{"GET", Root, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, Prefix+"sales", http.StatusSeeOther)
		})},
		{"GET", Prefix + "assets/{asset}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "public, max-age=3600")
			static.ServeHTTP(w, r)
		})},
		{"GET", Prefix + "signin", http.HandlerFunc(c.signInPage)},
		{"POST", Prefix + "signin", http.HandlerFunc(c.signIn)},
		{"POST", Prefix + "signout", c.form(c.signOut)},
		{"GET", Prefix + "sales", c.page(c.sales)},
		{"GET", Prefix + "skus/{sku}", c.page(c.skuPage)},
		{"GET", Prefix + "skus/{sku}/feed", c.background(c.feed)},
		{"GET", Prefix + "approvals", c.page(c.approvals)},
		{"POST", Prefix + "approvals", c.form(c.requestAdjustment)},
		{"POST", Prefix + "approvals/{id}/{decision}", c.form(c.decide)},
		{"GET", Prefix + "reconciliation", c.page(c.reconciliation)},
		{"POST", Prefix + "reconciliation", c.form(c.runReconcile)},
		{"GET", Prefix + "health", c.page(c.health)},
	}
}

// Routes lists the console's endpoints as "METHOD /path", as
// docs/openapi.yaml describes them.
func Routes() []string {
	var out []string
	for _, rt := range (&Console{}).table() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// muxPatterns are the net/http patterns of a described path: the entry
// page with and without its slash, and every file under assets/ (vendor/
// included).
func muxPatterns(path string) []string {
	switch path {
	case Root:
		return []string{Root, Prefix + "{$}"}
	case Prefix + "assets/{asset}":
		return []string{Prefix + "assets/"}
	}
	return []string{path}
}

func (c *Console) routes() {
	methods := map[string][]string{} // mux pattern → its methods
	for _, rt := range c.table() {
		for _, p := range muxPatterns(rt.path) {
			c.mux.Handle(rt.method+" "+p, rt.handler)
			methods[p] = append(methods[p], rt.method)
		}
	}
	// A served path asked with another method is 405 with Allow, not the
	// catch-all's 404.
	for p, ms := range methods {
		if slices.Contains(ms, http.MethodGet) {
			ms = append(ms, http.MethodHead)
		}
		allow := strings.Join(ms, ", ")
		c.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			c.render(w, r, http.StatusMethodNotAllowed, "error", session{}, errorView{Title: "Method not allowed", Message: "This page answers " + allow + "."})
		})
	}
	c.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", session{}, errorView{Title: "Not found", Message: "There is no such console page."})
	})
}

// ServeHTTP serves the console. Every answer forbids framing and caching.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	if !strings.HasPrefix(r.URL.Path, Prefix+"assets/") {
		h.Set("Cache-Control", "no-store")
	}
	c.handler.ServeHTTP(w, r)
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, s session)

// page serves a page to a signed-in user and renews the session's idle
// timer; without a session it sends the browser to sign in.
func (c *Console) page(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.session(w, r, true)
		if !ok {
			return
		}
		// A page's own refresh (htmx polling) is not the user's doing.
		if r.Header.Get("HX-Request") == "" {
			if err := c.writeSession(w, r, s); err != nil {
				c.fail(w, r, s, err)
				return
			}
		}
		h(w, r, s)
	})
}

// background serves the live feed and the figures a page polls: they need
// a session but do not renew it, so a page left open still goes idle.
func (c *Console) background(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, ok := c.session(w, r, false); ok {
			h(w, r, s)
		}
	})
}

// form handles a POST from a signed-in user's page: the origin must be the
// console's own (Sec-Fetch-Site/Origin, net/http's CrossOriginProtection)
// and the form must carry the session's CSRF token.
func (c *Console) form(h handlerFunc) http.Handler {
	cop := http.NewCrossOriginProtection()
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		s, ok := c.session(w, r, true)
		if !ok {
			return
		}
		if !checkCSRF(r, s) {
			c.render(w, r, http.StatusForbidden, "error", s, errorView{Title: "Refused",
				Message: "The form's CSRF token is missing or wrong. Open the page again and resend it."})
			return
		}
		if err := c.writeSession(w, r, s); err != nil {
			c.fail(w, r, s, err)
			return
		}
		h(w, r, s)
	}))
}

// session reads the request's session. Without one, a page request is sent
// to sign in and anything else gets 401.
func (c *Console) session(w http.ResponseWriter, r *http.Request, redirect bool) (session, bool) {
	s, err := c.readSession(r)
	switch {
	case err == nil:
		httpapi.SetPrincipal(w, s.Name)
		return s, true
	case errors.Is(err, errNoSession):
		c.clearSession(w, r)
		if redirect && r.Method == http.MethodGet {
			http.Redirect(w, r, Prefix+"signin?next="+r.URL.Path, http.StatusSeeOther)
		} else {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("not signed in\n"))
		}
	default:
		c.fail(w, r, session{}, err)
	}
	return session{}, false
}

// fail answers an error the user cannot fix by changing the form: the
// store unreachable (503) or a bug (500, logged).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s session, err error) {
	if errors.Is(err, domain.ErrUnavailable) {
		w.Header().Set("Retry-After", "1")
		c.render(w, r, http.StatusServiceUnavailable, "error", s, errorView{Title: "Unavailable",
			Message: "A database the console needs does not answer. Try again shortly."})
		return
	}
	c.cfg.Logger.ErrorContext(r.Context(), "console: "+r.Method+" "+r.URL.Path, "err", err)
	c.render(w, r, http.StatusInternalServerError, "error", s, errorView{Title: "Error", Message: "Something went wrong; the log says what."})
}
