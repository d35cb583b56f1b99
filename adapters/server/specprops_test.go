package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// casesPerRole is how many valid and how many invalid requests each
// operation gets per role that may call it in each of rounds passes over
// the operations (the second meets the holds, orders, SKUs and ids the
// first made): with the fixed seed, about 1,300 requests, a few seconds.
const (
	casesPerRole = 3
	rounds       = 2
)

// specCase is one generated request: its parts, and what was broken to
// make it invalid ("" when it is valid).
type specCase struct {
	route  *routers.Route
	params map[string]string // path parameters, unescaped
	query  url.Values
	header http.Header
	body   any // nil: no body
	broken string
}

// credential is how a request says who sends it: an API bearer token, or
// a console session's cookie and the CSRF token its forms carry; none
// when zero.
type credential struct {
	bearer string
	cookie *http.Cookie
	csrf   string
}

// TestGeneratedRequestsAgreeWithTheSpec generates requests from
// docs/openapi.yaml itself, for every operation but the console's feed
// and every role's token (the console's through a session each role signs
// in to), and sends them to a real serve: valid ones by the
// operation's schemas, and invalid ones that break one keyword of one
// parameter or of the body. kin-openapi's validator confirms each
// request's class before it is sent. No answer is a 5xx; every answer has
// X-Request-Id and matches the spec's status codes, content type, headers
// and schema; a valid request is answered 2xx or, as the state decides, a
// 404 or 409 the operation lists; an invalid one is refused with a 4xx;
// a token without the role gets 403 and none 401. The console, whose
// forms answer with a redirect to the outcome, may answer a valid request
// or an invalid form 303, and one without a session the 401 or 303 to sign in
// its operation lists. Every path, the
// console's too, asked with a method it does not describe answers 405
// with Allow and X-Request-Id.
func TestGeneratedRequestsAgreeWithTheSpec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	for _, sku := range []string{"gen-1", "gen-2", "gen-3"} {
		st.SKU(t, sku, 1000, 1_000_000_000) // a qty above the limit is 400, not a state this test varies
	}
	secrets := map[string]string{"gateway": "gen-gateway-secret-001", "operator": "gen-operator-secret-01",
		"approver": "gen-approver-secret-01", "auditor": "gen-auditor-secret-001"}
	var tokens []string
	for _, role := range slices.Sorted(maps.Keys(secrets)) {
		tokens = append(tokens, role+"-1:"+role+":"+secrets[role])
	}
	base := startServe(t, st, Config{Tokens: strings.Join(tokens, ","), ConsoleKey: conKey})
	doc, err := httpapi.LoadOpenAPI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := &schemaGen{rnd: rand.New(rand.NewPCG(25, 18)), keys: map[string]bool{}, known: map[string][]string{"sku": {"gen-1", "gen-2", "gen-3"}}}
	client := &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := client.Get(base + "/v1/openapi.json"); err != nil {
		t.Fatal(err)
	} else {
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		err := dec.Decode(&g.served)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	failures := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if failures++; failures <= 40 {
			t.Errorf(format, args...)
		}
	}

	// Each role but the gateway's, which may not, signs in to the
	// console, before the generated sign-ins' wrong tokens get this
	// address throttled: once, and once more for each sign-out the
	// generator may send (a session signed out is done with).
	sessions := map[string][]credential{}
	consoleRoles := []string{"approver", "auditor", "operator"}
	for _, role := range consoleRoles {
		for range 1 + rounds*casesPerRole {
			b := newBrowser(t, base)
			want(t, "sign-in as "+role, b.signIn(secrets[role]), 303)
			sessions[role] = append(sessions[role], credential{cookie: b.cookie(), csrf: b.csrf("/console/sales")})
		}
	}
	credentialOf := func(route *routers.Route, role string) credential {
		if strings.HasPrefix(route.Path, "/console") {
			if role == "" {
				return credential{} // signed out, or signing in
			}
			return sessions[role][0]
		}
		return credential{bearer: secrets[role]}
	}

	var routes []*routers.Route
	for _, path := range slices.Sorted(maps.Keys(doc.Paths.Map())) {
		if path == "/console/skus/{sku}/feed" {
			continue // a stream that never ends; TestConsoleLiveFeed and TestConsoleFeedsAreCapped read it
		}
		item := doc.Paths.Value(path)
		for _, method := range slices.Sorted(maps.Keys(item.Operations())) {
			routes = append(routes, &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: item.GetOperation(method)})
		}
	}
	sent, outcomes := 0, map[string]int{}
	for range rounds {
		// In a random order each round, so that a sale is met before and
		// after the close that ends it.
		g.rnd.Shuffle(len(routes), func(i, j int) { routes[i], routes[j] = routes[j], routes[i] })
		for _, route := range routes {
			path, method := route.Path, route.Method
			var roles []string
			if rs, ok := route.Operation.Extensions["x-invledger-roles"].([]any); ok {
				for _, r := range rs {
					roles = append(roles, r.(string))
				}
			}
			console := strings.HasPrefix(path, "/console")
			if console && route.Operation.Security != nil && len(*route.Operation.Security) > 0 {
				roles = consoleRoles
			}
			send := func(c *specCase, role string, want func(status int) bool, wantText string) {
				t.Helper()
				sent++
				req, desc := c.request(t, base, credentialOf(route, role))
				resp, err := client.Do(req)
				if err != nil {
					fail("%s: %v", desc, err)
					return
				}
				raw, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil {
					fail("%s: %v", desc, err)
					return
				}
				if !want(resp.StatusCode) {
					fail("%s = %d %.300s, want %s", desc, resp.StatusCode, raw, wantText)
				}
				if resp.StatusCode/100 == 2 {
					g.harvest(raw)
				}
				if resp.Header.Get("X-Request-Id") == "" {
					fail("%s = %d without X-Request-Id", desc, resp.StatusCode)
				}
				if path == "/console/signout" && role != "" && resp.StatusCode == 303 {
					sessions[role] = sessions[role][1:]
				}
				if route.Operation.Extensions["x-invledger-response-validation"] == "exempt" {
					return
				}
				opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
				in := &openapi3filter.RequestValidationInput{Request: req, PathParams: c.params, Route: route, Options: opts}
				out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
					Header: resp.Header, Body: io.NopCloser(bytes.NewReader(raw)), Options: opts}
				if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
					fail("%s answered %d %.300s, which breaks docs/openapi.yaml: %v", desc, resp.StatusCode, raw, err)
				}
			}
			listed := func(status int) bool { return route.Operation.Responses.Status(status) != nil }

			switch {
			case console && len(roles) > 0:
				if c := g.specCase(ctx, route, true); c != nil {
					send(c, "", func(s int) bool { return (s == 401 || s == 303) && listed(s) }, "the 401 or 303 to sign in it lists, without a session")
				}
			case len(roles) > 0:
				if c := g.specCase(ctx, route, true); c != nil {
					send(c, "", func(s int) bool { return s == 401 }, "401 without a token")
					for _, role := range slices.Sorted(maps.Keys(secrets)) {
						if !slices.Contains(roles, role) {
							send(c, role, func(s int) bool { return s == 403 }, "403 for role "+role)
							break
						}
					}
				}
			default:
				roles = []string{""} // public
			}
			validAnswer := func(s int) bool {
				outcomes[fmt.Sprintf("valid %d", s)]++
				// The console answers a form with a redirect to the
				// outcome; a generated sign-in token is a wrong one,
				// and the sixth from this address is throttled.
				return s/100 == 2 || (s == 404 || s == 409 || console && s == 303 ||
					path == "/console/signin" && (s == 401 || s == 429)) && listed(s)
			}
			for _, role := range roles {
				for range casesPerRole {
					c := g.specCase(ctx, route, true)
					if c == nil {
						fail("%s %s: the generator made no valid request", method, path)
						continue
					}
					send(c, role, validAnswer, "2xx, or a 404 or 409 it lists (a valid request as "+role+")")
					if c := g.specCase(ctx, route, false); c != nil {
						send(c, role, func(s int) bool {
							outcomes[fmt.Sprintf("invalid %d", s)]++
							// A console form is refused on the page it
							// redirects back to.
							return (s/100 == 4 || console && method == "POST" && s == 303) && listed(s)
						}, "a 4xx it lists (refused: "+c.broken+")")
					}
				}
				if role != "" && !console {
					g.idempotencyCases(ctx, route, func(c *specCase, want func(int) bool, wantText string) {
						send(c, role, want, wantText)
					}, validAnswer, listed)
				}
				// Each integer parameter at the largest value the spec
				// allows: the server takes what the spec calls valid.
				for _, p := range parameters(route) {
					if c := g.atMaximum(ctx, route, p.Value); c != nil {
						send(c, role, validAnswer, "2xx, or a 404 or 409 it lists (a valid request as "+role+", "+p.Value.Name+" at its maximum)")
					}
				}
			}
		}
	}

	// Every path, the console's too, asked with a method it does not
	// describe: 405 with Allow naming the described ones.
	for _, path := range slices.Sorted(maps.Keys(doc.Paths.Map())) {
		item := doc.Paths.Value(path)
		described := slices.Sorted(maps.Keys(item.Operations()))
		var anyOp string
		for _, m := range described {
			anyOp = m
		}
		c := g.validCase(&routers.Route{Spec: doc, Path: path, PathItem: item, Method: anyOp, Operation: item.GetOperation(anyOp)})
		for _, method := range []string{"GET", "PUT", "POST", "DELETE", "PATCH"} {
			if slices.Contains(described, method) {
				continue
			}
			sent++
			c.body, c.header, c.route = nil, http.Header{}, &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method}
			req, desc := c.request(t, base, credential{})
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			_ = resp.Body.Close()
			allow := strings.Split(strings.ReplaceAll(resp.Header.Get("Allow"), " ", ""), ",")
			if resp.StatusCode != 405 || resp.Header.Get("X-Request-Id") == "" || !slices.ContainsFunc(described, func(m string) bool { return slices.Contains(allow, m) }) {
				fail("%s = %d Allow %q X-Request-Id %q, want 405 allowing %v, with X-Request-Id", desc, resp.StatusCode,
					resp.Header.Get("Allow"), resp.Header.Get("X-Request-Id"), described)
			}
		}
	}
	// A request whose path Go's HTTP server cannot read, a % without two
	// hex digits, gets that server's plain-text 400 before any handler
	// runs: each operation's 400 lists it.
	for _, route := range routes {
		if strings.HasPrefix(route.Path, "/console") || !strings.Contains(route.Path, "{") {
			continue
		}
		c := g.validCase(route)
		req, _ := c.request(nil, base, credential{})
		if req == nil {
			continue
		}
		sent++
		target, _, _ := strings.Cut(req.URL.RequestURI(), "?")
		first := strings.Index(route.Path, "{")
		escaped := strings.Split(target, "/")
		escaped[strings.Count(route.Path[:first], "/")] = "%ZZ"
		target = strings.Join(escaped, "/")
		resp, raw := rawRequest(t, req.URL.Host, route.Method, target)
		desc := route.Method + " " + target + " (a malformed escape)"
		if resp.StatusCode != 400 {
			fail("%s = %d %.300s, want Go's 400", desc, resp.StatusCode, raw)
			continue
		}
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: c.params, Route: route, Options: opts}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
			Header: resp.Header, Body: io.NopCloser(bytes.NewReader(raw)), Options: opts}
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			fail("%s answered %d %s %.100s, which breaks docs/openapi.yaml: %v", desc, resp.StatusCode, resp.Header.Get("Content-Type"), raw, err)
		}
	}
	if failures > 40 {
		t.Errorf("... and %d more", failures-40)
	}
	t.Logf("%d generated requests; answers by class: %v", sent, outcomes)
}

// idempotencyCases sends, through send, what the Idempotency-Key rules
// of route make of valid requests. An operation that keeps a key's first
// answer (its Idempotency-Key parameter beside an Idempotent-Replayed
// header): the key used again for another request is the 422 it lists.
// One whose body member the header may carry (x-invledger-idempotency-key-is):
// that member given empty is refused with a 400, even with the header.
func (g *schemaGen) idempotencyCases(ctx context.Context, route *routers.Route, send func(c *specCase, want func(int) bool, wantText string),
	validAnswer, listed func(int) bool) {
	claims := false
	if parameters(route).GetByInAndName("header", "Idempotency-Key") != nil {
		for code, r := range route.Operation.Responses.Map() {
			if strings.HasPrefix(code, "2") && r.Value.Headers["Idempotent-Replayed"] != nil {
				claims = true
			}
		}
	}
	if c1 := g.specCase(ctx, route, true); claims && c1 != nil {
		key := fmt.Sprintf("reused-%d", g.rnd.Int64())
		c1.header.Set("Idempotency-Key", key)
		first := 0
		send(c1, func(s int) bool { first = s; return validAnswer(s) }, "2xx, or a 404 or 409 it lists (a valid request with a new key)")
		if c2 := g.specCase(ctx, route, true); first/100 == 2 && c2 != nil {
			c2.header.Set("Idempotency-Key", key)
			_, d1 := c1.request(nil, "http://127.0.0.1", credential{})
			_, d2 := c2.request(nil, "http://127.0.0.1", credential{})
			if d1 != d2 {
				c2.broken = "Idempotency-Key used for another request"
				send(c2, func(s int) bool { return s == 422 && listed(s) }, "the 422 it lists")
			}
		}
	}
	if prop, ok := route.Operation.Extensions["x-invledger-idempotency-key-is"].(string); ok {
		if c := g.specCase(ctx, route, true); c != nil {
			c.body.(map[string]any)[prop] = ""
			c.header.Set("Idempotency-Key", fmt.Sprintf("empty-%d", g.rnd.Int64()))
			c.broken = prop + " empty, beside Idempotency-Key"
			send(c, func(s int) bool { return s == 400 && listed(s) }, "the 400 it lists")
		}
	}
}

// rawRequest sends "method target" to host as written, which net/http's
// client would not, and reads the answer.
func rawRequest(t *testing.T, host, method, target string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, target, host); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// specCase generates a request of route, valid or invalid; nil when 50
// tries made none that kin-openapi's validator classes as asked (an
// operation without inputs has no invalid request).
func (g *schemaGen) specCase(ctx context.Context, route *routers.Route, valid bool) *specCase {
	for range 50 {
		c := g.validCase(route)
		if !valid && !g.breakCase(c) {
			return nil
		}
		req, _ := c.request(nil, "http://127.0.0.1", credential{})
		if req == nil {
			continue // a header net/http would not send
		}
		// The validator reads the headers as text, not as the ISO-8859-1
		// bytes sent.
		req = req.Clone(ctx)
		maps.Copy(req.Header, c.header)
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
		err := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{Request: req, PathParams: c.params, Route: route, Options: opts})
		if key := c.header.Get("Idempotency-Key"); (err == nil) == valid && !g.keys[key] {
			// A key is sent once: the same key with another request is
			// refused by design.
			g.keys[key] = key != ""
			return c
		}
	}
	return nil
}

// atMaximum is a valid request of route with integer parameter p at its
// schema's maximum as the served document writes it, or at 2^64, which no
// int64 holds, when the schema has none and so, as JSON Schema reads it,
// calls it valid. kin-openapi's validator, which parses integer
// parameters as int64 and bounds as float64, is not asked: the maximum is
// valid by the schema's own words. nil when p is no integer.
func (g *schemaGen) atMaximum(ctx context.Context, route *routers.Route, p *openapi3.Parameter) *specCase {
	s := p.Schema.Value
	if !s.Type.Is("integer") {
		return nil
	}
	c := g.specCase(ctx, route, true)
	if c == nil {
		return nil
	}
	v := "18446744073709551616"
	if s.Max != nil {
		// As the served document writes it: a client does not round it.
		v = g.servedMaximum(route, p)
	}
	c.set(p, v)
	return c
}

// servedMaximum is the maximum of route's parameter p as GET
// /v1/openapi.json writes it, digit for digit.
func (g *schemaGen) servedMaximum(route *routers.Route, p *openapi3.Parameter) string {
	resolve := func(v any) map[string]any {
		m, _ := v.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			var at any = g.served
			for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				at = at.(map[string]any)[part]
			}
			m, _ = at.(map[string]any)
		}
		return m
	}
	item := resolve(g.served["paths"].(map[string]any)[route.Path])
	op := resolve(item[strings.ToLower(route.Method)])
	for _, list := range []any{op["parameters"], item["parameters"]} {
		ps, _ := list.([]any)
		for _, ref := range ps {
			if param := resolve(ref); param["name"] == p.Name && param["in"] == p.In {
				if n, ok := resolve(param["schema"])["maximum"].(json.Number); ok {
					return string(n)
				}
			}
		}
	}
	panic("servedMaximum: no maximum of " + p.Name + " at " + route.Method + " " + route.Path)
}

// set gives parameter p the value v.
func (c *specCase) set(p *openapi3.Parameter, v string) {
	switch p.In {
	case openapi3.ParameterInPath:
		c.params[p.Name] = v
	case openapi3.ParameterInQuery:
		c.query.Set(p.Name, v)
	case openapi3.ParameterInHeader:
		c.header.Set(p.Name, v)
	}
}

// parameters are the operation's and its path's, the operation's first.
func parameters(route *routers.Route) openapi3.Parameters {
	ps := slices.Clone(route.Operation.Parameters)
	for _, p := range route.PathItem.Parameters {
		if ps.GetByInAndName(p.Value.In, p.Value.Name) == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// validCase fills every required parameter and, at random, the optional
// ones and an optional body, each with a valid value. A path parameter or
// a body member that names a resource is, half of the time, a value an
// answer gave (seen), so that purchases, reads, confirms and decisions meet
// what exists as well as what does not.
func (g *schemaGen) validCase(route *routers.Route) *specCase {
	c := &specCase{route: route, params: map[string]string{}, query: url.Values{}, header: http.Header{}}
	for _, p := range parameters(route) {
		pv := p.Value
		if !pv.Required && g.rnd.IntN(2) == 0 {
			continue
		}
		v := paramText(g.valid(pv.Schema.Value))
		switch pv.In {
		case openapi3.ParameterInPath:
			if known := g.seen(pv.Name, pv.Schema.Value); known != nil && g.rnd.IntN(2) == 0 {
				v = paramText(known)
			}
			c.params[pv.Name] = v
		case openapi3.ParameterInQuery:
			c.query.Set(pv.Name, v)
		case openapi3.ParameterInHeader:
			c.header.Set(pv.Name, v)
		}
	}
	if mt, _ := requestBody(route); mt != nil && (route.Operation.RequestBody.Value.Required || g.rnd.IntN(4) != 0) {
		c.body = g.valid(mt.Schema.Value)
	}
	// An operation whose body member the Idempotency-Key header may also
	// carry: the header, equal to it, half of the time, as the
	// description asks of callers. The schemas alone make the request
	// valid: a tool that reads only them sends no more.
	if prop, ok := route.Operation.Extensions["x-invledger-idempotency-key-is"].(string); ok {
		if v, given := c.body.(map[string]any)[prop].(string); given && asciiKey.MatchString(v) && g.rnd.IntN(2) == 0 {
			c.header.Set("Idempotency-Key", v)
		}
	}
	return c
}

// asciiKey is what an Idempotency-Key header carries: visible ASCII,
// spaces inside.
var asciiKey = regexp.MustCompile(`^[!-~](?:[ -~]{0,126}[!-~])?$`)

// requestBody is the request body route describes, JSON or the console's
// form, and its content type; nil when none.
func requestBody(route *routers.Route) (*openapi3.MediaType, string) {
	if route.Operation == nil {
		return nil, "" // a method the path does not describe
	}
	if rb := route.Operation.RequestBody; rb != nil {
		for _, ct := range []string{"application/json", "application/x-www-form-urlencoded"} {
			if mt := rb.Value.Content.Get(ct); mt != nil {
				return mt, ct
			}
		}
	}
	return nil, ""
}

// breakCase makes c invalid in one place, a parameter or the body; false
// when route has nothing to break.
func (g *schemaGen) breakCase(c *specCase) bool {
	var breaks []func() bool
	for _, p := range parameters(c.route) {
		pv := p.Value
		breaks = append(breaks, func() bool {
			v, what, ok := g.invalid(pv.Schema.Value)
			if !ok {
				return false
			}
			text := paramText(v)
			if text == "" && pv.In == openapi3.ParameterInPath {
				return false // an empty segment makes another path, not a bad value of this one
			}
			if pv.In == openapi3.ParameterInPath && !strings.HasPrefix(c.route.Path, "/console") && pv.Schema.Value.VisitJSON(".") != nil && g.rnd.IntN(3) == 0 {
				// A dot segment, which a client sends as it is (the
				// console's pages redirect it, as browsers expect).
				text, what = []string{".", ".."}[g.rnd.IntN(2)], "a dot segment"
			}
			c.set(pv, text)
			c.broken = pv.Name + " " + what
			return true
		})
		if pv.Required && pv.In == openapi3.ParameterInQuery {
			breaks = append(breaks, func() bool {
				c.query.Del(pv.Name)
				c.broken = pv.Name + " missing"
				return true
			})
		}
	}
	if mt, _ := requestBody(c.route); mt != nil {
		breaks = append(breaks, func() bool {
			v, what, ok := g.invalid(mt.Schema.Value)
			if !ok || v == nil && !c.route.Operation.RequestBody.Value.Required {
				return false
			}
			c.body, c.broken = v, "body "+what
			return true
		})
	}
	for len(breaks) > 0 {
		i := g.rnd.IntN(len(breaks))
		if breaks[i]() {
			return true
		}
		breaks = slices.Delete(breaks, i, i+1)
	}
	return false
}

// request is c as an HTTP request to base with cred, and how a failure
// names it: a form's csrf, unless it is what was broken, is cred's. With
// t nil it is nil when net/http would refuse to send a header of c, or
// the body is not an object a form can carry.
func (c *specCase) request(t *testing.T, base string, cred credential) (*http.Request, string) {
	path := c.route.Path
	for name, v := range c.params {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	target := base + path
	if len(c.query) > 0 {
		target += "?" + c.query.Encode()
	}
	var body []byte
	_, contentType := requestBody(c.route)
	switch fields, isObject := c.body.(map[string]any); {
	case contentType == "application/x-www-form-urlencoded" && c.body != nil:
		if !isObject {
			return nil, ""
		}
		form := url.Values{}
		for name, v := range fields {
			form.Set(name, paramText(v))
		}
		if _, ok := fields["csrf"]; ok && cred.csrf != "" && !strings.HasPrefix(c.broken, "body csrf") {
			form.Set("csrf", cred.csrf)
		}
		body = []byte(form.Encode())
	case c.body != nil || c.broken == "body null":
		contentType = "application/json"
		var err error
		if body, err = json.Marshal(c.body); err != nil {
			panic(err)
		}
	}
	req, err := http.NewRequest(c.route.Method, target, bytes.NewReader(body))
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		return nil, ""
	}
	for name, vs := range c.header {
		v, ok := latin1(vs[0])
		if !ok || !printableText(vs[0]) || strings.TrimSpace(vs[0]) != vs[0] {
			return nil, "" // HTTP cannot carry it, or drops the spaces
		}
		req.Header[name] = []string{v}
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if contentType == "application/x-www-form-urlencoded" {
		// What a browser sends with a form of the page's own origin.
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if cred.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+cred.bearer)
	}
	if cred.cookie != nil {
		req.AddCookie(cred.cookie)
	}
	desc := fmt.Sprintf("%s %s %v %s", c.route.Method, target, c.header, body)
	if c.broken != "" {
		desc += " (" + c.broken + ")"
	}
	return req, desc
}

// latin1 is s as HTTP/1.1 clients (Python's among them) send a header's
// text, ISO-8859-1; false when s has a character beyond it.
func latin1(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return "", false
		}
		b = append(b, byte(r))
	}
	return string(b), true
}

// harvest keeps the values of an answer's members that name a resource
// (sku, hold_id, order_id, user_id, and id for adjustments, dead letters
// and webhooks), for path parameters of later requests.
func (g *schemaGen) harvest(raw []byte) {
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				walk(k, sub)
			}
		case []any:
			for _, sub := range v {
				walk(key, sub)
			}
		case string, json.Number:
			switch key {
			case "sku", "hold_id", "order_id", "user_id", "id":
				// Kept as often as answers give it: what most answers
				// name, the SKU on sale, is picked most.
				g.known[key] = append(g.known[key], paramText(v))
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		walk("", v)
	}
}

// seen is a value harvested under name (or under id, for a name that is
// id or ends in _id) that s accepts, a json.Number for an integer schema;
// nil when there is none.
func (g *schemaGen) seen(name string, s *openapi3.Schema) any {
	pool := g.known[name]
	if name != "id" && strings.HasSuffix(name, "_id") {
		pool = slices.Concat(pool, g.known["id"])
	}
	var fits []any
	for _, v := range pool {
		var value any = v
		if s.Type.Is("integer") {
			value = json.Number(v)
		}
		if s.VisitJSON(value) == nil {
			fits = append(fits, value)
		}
	}
	if len(fits) == 0 {
		return nil
	}
	return fits[g.rnd.IntN(len(fits))]
}
