package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/invledger/invledger/adapters/internal/httpapi"
)

// pageNames are the templates under templates/, each rendered inside layout.html.
var pageNames = []string{"signin", "error", "sales", "sku", "approvals", "reconciliation", "health"}

var funcs = template.FuncMap{
	// when renders an instant as a <time>: UTC in the markup and on hover;
	// console.js rewrites the text into the browser's zone.
	"when": func(t any) template.HTML {
		var tt time.Time
		switch v := t.(type) {
		case time.Time:
			tt = v
		case *time.Time:
			if v == nil {
				return "—"
			}
			tt = *v
		case string:
			p, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return template.HTML(template.HTMLEscapeString(v))
			}
			tt = p
		}
		if tt.IsZero() {
			return "—"
		}
		u := tt.UTC()
		return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s">%s</time>`,
			u.Format(time.RFC3339Nano), u.Format("2006-01-02 15:04:05 UTC"), u.Format("2006-01-02 15:04:05 UTC")))
	},
	"num": func(p *int64) string {
		if p == nil {
			return "—"
		}
		return strconv.FormatInt(*p, 10)
	},
	"deref": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"query": func(base string, kv ...string) string {
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				q.Set(kv[i], kv[i+1])
			}
		}
		if len(q) == 0 {
			return base
		}
		return base + "?" + q.Encode()
	},
}

func parsePages() (map[string]*template.Template, error) {
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// view is what every page template gets: who is signed in, what they may
// press, which page is open, and the page's own data.
type view struct {
	Signed  bool
	Name    string
	Role    httpapi.Role
	CSRF    string
	Page    string
	Data    any
	Flash   string
	Problem string
}

// CanRequest, CanApprove and CanReconcile follow the API's role matrix; the
// API decides anyway, these only decide what the page offers.
func (v view) CanRequest() bool   { return v.Role == httpapi.RoleOperator }
func (v view) CanApprove() bool   { return v.Role == httpapi.RoleApprover }
func (v view) CanReconcile() bool { return v.Role == httpapi.RoleOperator }

type errorView struct {
	Title, Message string
}

// render writes page with data for s, buffered so a template error is a
// clean 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, s session, data any) {
	v := view{Signed: s.ID != "", Name: s.Name, Role: s.Role, CSRF: s.CSRF, Page: page, Data: data}
	if f, ok := c.takeFlash(w, r, s); ok {
		v.Flash, v.Problem = f.Done, f.Problem
	}
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, v); err != nil {
		c.cfg.Logger.ErrorContext(r.Context(), "console: render "+page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// flashCookie carries a form's outcome to the page the browser is sent
// back to. It is sealed with the session's codec and names the session, so
// nobody else's text (a link's query, another session's cookie) is shown
// on a genuine page.
const flashCookie = "invledger_flash"

// flash is a form's outcome: a refusal as Problem, a success as Done.
type flash struct {
	Session, Done, Problem string
}

// back sends the browser back to the page it came from with a message,
// after a form: a refusal is shown as a problem, success as done.
func (c *Console) back(w http.ResponseWriter, r *http.Request, path string, s session, err error, done string) {
	f := flash{Session: s.ID, Done: done}
	if err != nil {
		f = flash{Session: s.ID, Problem: err.Error()}
	}
	if v, encErr := c.codec.Encode(flashCookie, f); encErr == nil {
		http.SetCookie(w, c.cookie(r, flashCookie, v, 60))
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// takeFlash reads and clears the flash cookie of s's session; a page's own
// refresh (htmx) leaves it for the page itself.
func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request, s session) (flash, bool) {
	ck, err := r.Cookie(flashCookie)
	if err != nil || s.ID == "" || r.Header.Get("HX-Request") != "" {
		return flash{}, false
	}
	http.SetCookie(w, c.cookie(r, flashCookie, "", -1))
	var f flash
	if c.codec.Decode(flashCookie, ck.Value, &f) != nil || f.Session != s.ID {
		return flash{}, false
	}
	return f, true
}

// userError is the message of an API refusal, or false when err is not one.
func userError(err error) (string, bool) {
	var ae *apiError
	if !errors.As(err, &ae) {
		return "", false
	}
	return strings.TrimSpace(ae.Error()), true
}
