package console

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/securecookie"

	"github.com/invledger/invledger/adapters/internal/httpapi"
)

// SessionStore records sign-ins and sign-outs where every serve process
// behind one balancer sees them. The session itself is in the cookie; the
// store only says whether it was ended. *pgstore.PostgresConsoleSessionStore
// satisfies it.
type SessionStore interface {
	Start(ctx context.Context, id, name, role string, forgetBefore time.Time) error
	Active(ctx context.Context, id string) (bool, error)
	End(ctx context.Context, id string) error
}

// cookieName is the session cookie. The __Host- prefix would be better, but
// browsers accept it only with Secure, which plain-HTTP demos lack.
const cookieName = "invledger_console"

// session is what the cookie carries, encrypted and authenticated. Secret
// is the bearer token the user pasted: every page calls the API with it,
// so a token removed from the token set ends its sessions at once.
type session struct {
	ID      string
	Name    string
	Role    httpapi.Role
	Secret  string
	CSRF    string
	Started int64 // Unix seconds
}

// MinKeyLen is the shortest console key accepted.
const MinKeyLen = 32

// codecs derives the cookie's MAC and encryption keys from the console key
// with HKDF, so one configured secret gives two independent keys.
func newCodec(key []byte, idle time.Duration) (*securecookie.SecureCookie, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("console key is %d bytes; at least %d are required", len(key), MinKeyLen)
	}
	hashKey, err := hkdf.Key(sha256.New, key, nil, "invledger console cookie mac", 64)
	if err != nil {
		return nil, err
	}
	blockKey, err := hkdf.Key(sha256.New, key, nil, "invledger console cookie aes", 32)
	if err != nil {
		return nil, err
	}
	sc := securecookie.New(hashKey, blockKey)
	// securecookie stamps the time of encoding and refuses a value older
	// than MaxAge: re-encoding on each page the user opens makes it an
	// idle timeout.
	sc.MaxAge(int(idle / time.Second))
	sc.SetSerializer(securecookie.JSONEncoder{})
	return sc, nil
}

// GenerateKey returns a random console key, for a demo or a single process.
func GenerateKey() []byte {
	return []byte(rand.Text() + rand.Text())
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// errNoSession is why a request has no usable session: none, expired by
// idleness or age, tampered with, signed out, or its token withdrawn.
var errNoSession = errors.New("not signed in")

// readSession decodes and checks the request's session cookie.
func (c *Console) readSession(r *http.Request) (session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, errNoSession
	}
	var s session
	if err := c.codec.Decode(cookieName, ck.Value, &s); err != nil {
		return session{}, errNoSession
	}
	if time.Since(time.Unix(s.Started, 0)) > c.cfg.MaxAge {
		return session{}, errNoSession
	}
	// The token is checked again as the API checks it: a token taken out
	// of the set (SIGHUP) signs its sessions out.
	if p, ok := c.cfg.Tokens.Lookup(s.Secret); !ok || p.Name != s.Name || p.Role != s.Role {
		return session{}, errNoSession
	}
	active, err := c.cfg.Sessions.Active(r.Context(), s.ID)
	if err != nil {
		return session{}, err
	}
	if !active {
		return session{}, errNoSession
	}
	return s, nil
}

// writeSession sets the cookie for s, stamped now.
func (c *Console) writeSession(w http.ResponseWriter, r *http.Request, s session) error {
	v, err := c.codec.Encode(cookieName, s)
	if err != nil {
		return err
	}
	http.SetCookie(w, c.cookie(r, cookieName, v, 0))
	return nil
}

func (c *Console) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, c.cookie(r, cookieName, "", -1))
}

// cookie is one of the console's cookies: its pages only, out of reach of
// scripts and of other sites, Secure over TLS or when told so.
func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil || c.cfg.SecureCookie, SameSite: http.SameSiteStrictMode}
}

// checkCSRF compares the form's csrf field with the session's token.
func checkCSRF(r *http.Request, s session) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) == 1
}
