package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/invledger/invledger/domain"
)

// Role is what a bearer token may do. The roles and what they allow are part
// of the public contract (docs/api.md).
type Role string

const (
	// RoleGateway deducts and releases: the storefront's purchase path.
	RoleGateway Role = "gateway"
	// RoleOperator creates and warms SKUs, requests adjustments and reconciles.
	RoleOperator Role = "operator"
	// RoleApprover approves or rejects adjustments requested by someone else.
	RoleApprover Role = "approver"
	// RoleAuditor reads.
	RoleAuditor Role = "auditor"
)

// Roles lists every role, from the narrowest to the reader.
var Roles = []Role{RoleGateway, RoleOperator, RoleApprover, RoleAuditor}

// ParseRole validates s as a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q is not one of gateway, operator, approver, auditor", s)
}

// roleSet is a bit set of roles; routes declare which roles they admit.
type roleSet uint8

func (r Role) bit() roleSet {
	for i, x := range Roles {
		if x == r {
			return 1 << i
		}
	}
	return 0
}

func rolesOf(rs ...Role) roleSet {
	var s roleSet
	for _, r := range rs {
		s |= r.bit()
	}
	return s
}

func (s roleSet) has(r Role) bool { return s&r.bit() != 0 }

// Role sets of the role matrix: which roles may call which routes.
var (
	gatewayOnly  = rolesOf(RoleGateway)
	operatorOnly = rolesOf(RoleOperator)
	approverOnly = rolesOf(RoleApprover)
	// readers is "auditor+": every role that may read, which is all but gateway.
	readers = rolesOf(RoleAuditor, RoleOperator, RoleApprover)
	// holdReaders may read a hold: any gateway, since all gateway tokens
	// are one tenant (no hold or order records who made it), and readers.
	holdReaders = rolesOf(RoleGateway, RoleAuditor, RoleOperator, RoleApprover)
)

const (
	// MinSecretLen is the shortest bearer secret accepted.
	MinSecretLen = 16
	maxNameLen   = 64
)

// Token is one bearer credential: the principal Name, the Role the secret
// grants and the Secret itself. One name may hold several roles through
// several tokens, each with its own secret; the name is the identity (for
// example, an approver may not approve what the same name requested).
type Token struct {
	Name   string
	Role   Role
	Secret string
}

// String never shows the secret, so a Token can be logged safely.
func (t Token) String() string { return t.Name + ":" + string(t.Role) + ":<redacted>" }

// ParseTokens parses INVLEDGER_TOKENS: name:role:secret entries separated by
// commas or newlines. Blank entries are skipped and a line whose first
// non-blank character is # is a comment, so the content of
// INVLEDGER_TOKENS_FILE goes through the same parser. The secret is
// everything after the second colon and may itself contain colons.
//
// Errors name the entry (1-based, counting entries only) and its line and
// field, and never contain a secret. An empty input gives no tokens and no
// error; Config.Validate refuses an empty set.
func ParseTokens(s string) ([]Token, error) {
	var (
		tokens []Token
		errs   []error
	)
	for n, entry := range domain.SplitListSetting(s) {
		where := fmt.Sprintf("tokens entry %d (line %d)", n+1, entry.Line)
		parts := strings.SplitN(entry.Text, ":", 3)
		if len(parts) != 3 {
			errs = append(errs, fmt.Errorf("%s: want name:role:secret, found %d field(s)", where, len(parts)))
			continue
		}
		tok := Token{Name: parts[0], Role: Role(parts[1]), Secret: parts[2]}
		if err := checkToken(tok); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		tokens = append(tokens, tok)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := checkDuplicates(tokens); err != nil {
		return nil, err
	}
	return tokens, nil
}

// checkToken validates one token's fields; the error names the field.
func checkToken(t Token) error {
	var errs []error
	if !validName(t.Name) {
		errs = append(errs, fmt.Errorf("name %q must be 1-%d characters of A-Z a-z 0-9 . _ @ -", t.Name, maxNameLen))
	}
	if _, err := ParseRole(string(t.Role)); err != nil {
		errs = append(errs, err)
	}
	switch {
	case utf8.RuneCountInString(t.Secret) < MinSecretLen:
		errs = append(errs, fmt.Errorf("secret is %d characters; at least %d are required", utf8.RuneCountInString(t.Secret), MinSecretLen))
	case strings.ContainsFunc(t.Secret, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ',' }):
		errs = append(errs, errors.New("secret must not contain spaces, control characters or commas"))
	}
	return errors.Join(errs...)
}

func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '@' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// checkDuplicates refuses a secret given twice (it would be ambiguous which
// principal presented it), a name given the same role twice, and names that
// differ only by case: "Alice" and "alice" are one person to the
// self-approval rule, so they must not look like two.
func checkDuplicates(tokens []Token) error {
	var errs []error
	secrets := make(map[[sha256.Size]byte]int, len(tokens))
	grants := make(map[[2]string]int, len(tokens))
	names := make(map[string]int, len(tokens))
	for i, t := range tokens {
		if j, dup := names[strings.ToLower(t.Name)]; dup && tokens[j].Name != t.Name {
			errs = append(errs, fmt.Errorf("token %d's name %q differs from token %d's %q only by case: use one spelling per person", i+1, t.Name, j+1, tokens[j].Name))
		} else if !dup {
			names[strings.ToLower(t.Name)] = i
		}
		d := sha256.Sum256([]byte(t.Secret))
		if j, dup := secrets[d]; dup {
			errs = append(errs, fmt.Errorf("token %d (%s) reuses the secret of token %d (%s): every token needs its own secret", i+1, t.Name, j+1, tokens[j].Name))
		} else {
			secrets[d] = i
		}
		k := [2]string{t.Name, string(t.Role)}
		if j, dup := grants[k]; dup {
			errs = append(errs, fmt.Errorf("token %d repeats name %q with role %s of token %d", i+1, t.Name, t.Role, j+1))
		} else {
			grants[k] = i
		}
	}
	return errors.Join(errs...)
}

// ValidateTokens checks a token set as NewHandler will: every field valid, no
// secret used twice, no name holding the same role twice, at least one token.
func ValidateTokens(tokens []Token) error {
	if len(tokens) == 0 {
		return errors.New("no tokens: set INVLEDGER_TOKENS or INVLEDGER_TOKENS_FILE to name:role:secret entries")
	}
	var errs []error
	for i, t := range tokens {
		if err := checkToken(t); err != nil {
			errs = append(errs, fmt.Errorf("token %d (%s): %w", i+1, t.Name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return checkDuplicates(tokens)
}

// Principal is who presented a token: its name and the role that token grants.
type Principal struct {
	Name string
	Role Role
}

type credential struct {
	digest    [sha256.Size]byte
	principal Principal
}

// Tokens finds the principal of a bearer secret. Secrets are kept only as
// SHA-256 digests and compared in constant time against every token, so the
// time taken tells nothing about which token, or how much of one, matched.
type Tokens struct {
	creds []credential
}

// NewTokens builds the lookup set after ValidateTokens.
func NewTokens(tokens []Token) (*Tokens, error) {
	if err := ValidateTokens(tokens); err != nil {
		return nil, err
	}
	ts := &Tokens{creds: make([]credential, len(tokens))}
	for i, t := range tokens {
		ts.creds[i] = credential{digest: sha256.Sum256([]byte(t.Secret)), principal: Principal{Name: t.Name, Role: t.Role}}
	}
	return ts, nil
}

// Lookup returns the principal whose secret is secret.
func (ts *Tokens) Lookup(secret string) (Principal, bool) {
	d := sha256.Sum256([]byte(secret))
	found, idx := 0, 0
	for i := range ts.creds {
		eq := subtle.ConstantTimeCompare(d[:], ts.creds[i].digest[:])
		idx = subtle.ConstantTimeSelect(eq, i, idx)
		found |= eq
	}
	if found == 0 {
		return Principal{}, false
	}
	return ts.creds[idx].principal, true
}

// Authenticate finds the principal of the request's Authorization: Bearer header.
func (ts *Tokens) Authenticate(r *http.Request) (Principal, bool) {
	secret, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return Principal{}, false
	}
	return ts.Lookup(secret)
}

// TokenSet is a token set that can be replaced while the handler serves,
// as when the tokens file is re-read on SIGHUP. Requests authenticated
// before a Replace keep their principal; later ones see the new set.
type TokenSet struct {
	cur atomic.Pointer[Tokens]
}

// NewTokenSet returns a set holding tokens, after ValidateTokens.
func NewTokenSet(tokens []Token) (*TokenSet, error) {
	s := &TokenSet{}
	if err := s.Replace(tokens); err != nil {
		return nil, err
	}
	return s, nil
}

// Replace swaps tokens in if they pass ValidateTokens; otherwise it returns
// the error and the set keeps its current tokens.
func (s *TokenSet) Replace(tokens []Token) error {
	ts, err := NewTokens(tokens)
	if err != nil {
		return err
	}
	s.cur.Store(ts)
	return nil
}

// Authenticate finds the principal of the request's bearer token in the
// current tokens.
func (s *TokenSet) Authenticate(r *http.Request) (Principal, bool) {
	ts := s.cur.Load()
	if ts == nil {
		return Principal{}, false
	}
	return ts.Authenticate(r)
}

// Lookup finds the principal of a bearer secret in the current tokens, as
// Authenticate does for a request; the console checks a pasted token with it.
func (s *TokenSet) Lookup(secret string) (Principal, bool) {
	ts := s.cur.Load()
	if ts == nil {
		return Principal{}, false
	}
	return ts.Lookup(secret)
}

// bearer extracts the credential of an "Authorization: Bearer <secret>"
// header value; the scheme is case-insensitive (RFC 9110).
func bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	s := strings.TrimSpace(h[len(scheme):])
	return s, s != ""
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p; the auth middleware calls it.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the authenticated principal of a request's context.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
