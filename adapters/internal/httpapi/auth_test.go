package httpapi

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	const (
		s1 = "0123456789abcdef"
		s2 = "fedcba9876543210"
		s3 = "secret:with:colons-long"
	)
	tests := []struct {
		name    string
		in      string
		want    []Token
		wantErr []string // substrings of the error; nil means no error
	}{
		{name: "empty", in: "", want: nil},
		{name: "blank and comments", in: "  \n# a comment\n\t\n", want: nil},
		{name: "one", in: "gw:gateway:" + s1, want: []Token{{"gw", RoleGateway, s1}}},
		{
			name: "comma separated with spaces",
			in:   " gw:gateway:" + s1 + " , op:operator:" + s2 + ",",
			want: []Token{{"gw", RoleGateway, s1}, {"op", RoleOperator, s2}},
		},
		{
			name: "file form",
			in:   "# tokens for staging\ngw:gateway:" + s1 + "\n\n  # the operator\nop:operator:" + s2 + "\r\nau:auditor:" + s3 + "\n",
			want: []Token{{"gw", RoleGateway, s1}, {"op", RoleOperator, s2}, {"au", RoleAuditor, s3}},
		},
		{name: "secret keeps its colons", in: "au:auditor:" + s3, want: []Token{{"au", RoleAuditor, s3}}},
		{
			name: "one name several roles",
			in:   "alice:operator:" + s1 + ",alice:approver:" + s2,
			want: []Token{{"alice", RoleOperator, s1}, {"alice", RoleApprover, s2}},
		},
		{name: "two fields", in: "gw:" + s1, wantErr: []string{"entry 1 (line 1)", "name:role:secret", "2 field"}},
		{name: "one field", in: "gw:gateway:" + s1 + ",oops", wantErr: []string{"entry 2 (line 1)", "1 field"}},
		{name: "unknown role", in: "x:admin:" + s1, wantErr: []string{"entry 1", `role "admin"`}},
		{name: "empty role", in: "x::" + s1, wantErr: []string{"entry 1", `role ""`}},
		{name: "short secret", in: "gw:gateway:short", wantErr: []string{"entry 1", "secret is 5 characters", "16"}},
		{name: "empty secret", in: "gw:gateway:", wantErr: []string{"entry 1", "secret is 0 characters"}},
		{name: "secret with space", in: "gw:gateway:0123456789 abcdefgh", wantErr: []string{"entry 1", "secret must not contain"}},
		{name: "empty name", in: ":gateway:" + s1, wantErr: []string{"entry 1", `name ""`}},
		{name: "bad name", in: "g w:gateway:" + s1, wantErr: []string{"entry 1", `name "g w"`}},
		{name: "second line", in: "gw:gateway:" + s1 + "\n# c\nop:oper:" + s2, wantErr: []string{"entry 2 (line 3)", `role "oper"`}},
		{name: "duplicate secret", in: "gw:gateway:" + s1 + ",op:operator:" + s1, wantErr: []string{"token 2 (op) reuses the secret of token 1 (gw)"}},
		{name: "duplicate name and role", in: "gw:gateway:" + s1 + ",gw:gateway:" + s2, wantErr: []string{`token 2 repeats name "gw" with role gateway`}},
		{name: "every bad entry reported", in: "a:admin:" + s1 + ",b:gateway:x", wantErr: []string{"entry 1", "entry 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTokens(tt.in)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ParseTokens: %v", err)
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("ParseTokens = %v, want %v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseTokens = %v, want an error", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, secret := range []string{s1, s2, "short", "0123456789 abcdefgh"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q reveals a secret", err)
				}
			}
		})
	}
}

func TestTokenStringRedacts(t *testing.T) {
	tok := Token{"gw", RoleGateway, "0123456789abcdef"}
	if s := tok.String(); strings.Contains(s, tok.Secret) {
		t.Fatalf("Token.String() = %q reveals the secret", s)
	}
}

func TestValidateTokens(t *testing.T) {
	if err := ValidateTokens(nil); err == nil || !strings.Contains(err.Error(), "INVLEDGER_TOKENS") {
		t.Fatalf("ValidateTokens(nil) = %v, want an error pointing at INVLEDGER_TOKENS", err)
	}
	err := ValidateTokens([]Token{{"gw", "root", "0123456789abcdef"}})
	if err == nil || !strings.Contains(err.Error(), "token 1 (gw)") {
		t.Fatalf("ValidateTokens(bad role) = %v", err)
	}
}

func TestTokensLookup(t *testing.T) {
	tokens := []Token{
		{"gw", RoleGateway, "gateway-secret-0001"},
		{"alice", RoleOperator, "alice-operator-0001"},
		{"alice", RoleApprover, "alice-approver-0001"},
	}
	ts, err := NewTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range tokens {
		p, ok := ts.Lookup(tok.Secret)
		if !ok || p != (Principal{tok.Name, tok.Role}) {
			t.Errorf("Lookup(%s) = %v, %v; want %s/%s", tok, p, ok, tok.Name, tok.Role)
		}
	}
	for _, bad := range []string{"", "gateway-secret-000", "gateway-secret-00011", "GATEWAY-SECRET-0001", "x"} {
		if p, ok := ts.Lookup(bad); ok {
			t.Errorf("Lookup(%q) = %v, want no match", bad, p)
		}
	}

	headers := map[string]bool{
		"Bearer gateway-secret-0001":   true,
		"bearer gateway-secret-0001":   true,
		"BEARER  gateway-secret-0001 ": true,
		"":                             false,
		"Bearer":                       false,
		"Bearer ":                      false,
		"Basic gateway-secret-0001":    false,
		"gateway-secret-0001":          false,
		"Bearergateway-secret-0001":    false,
	}
	for h, want := range headers {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		if _, ok := ts.Authenticate(r); ok != want {
			t.Errorf("Authenticate(%q) = %v, want %v", h, ok, want)
		}
	}
}

func TestRoleMatrix(t *testing.T) {
	tests := []struct {
		set  roleSet
		want []Role
	}{
		{gatewayOnly, []Role{RoleGateway}},
		{operatorOnly, []Role{RoleOperator}},
		{approverOnly, []Role{RoleApprover}},
		{readers, []Role{RoleOperator, RoleApprover, RoleAuditor}},
	}
	for _, tt := range tests {
		for _, r := range Roles {
			if got, want := tt.set.has(r), slices.Contains(tt.want, r); got != want {
				t.Errorf("set %b has(%s) = %v, want %v", tt.set, r, got, want)
			}
		}
	}
	if roleSet(0xff).has("nobody") {
		t.Error("an unknown role is in a set")
	}
}

// TestParseTokensRefusesNamesDifferingByCase: "Alice" and "alice" are one
// person to the self-approval rule, so a token set may not spell them two
// ways; one name with several roles stays fine.
func TestParseTokensRefusesNamesDifferingByCase(t *testing.T) {
	_, err := ParseTokens("alice:operator:aaaaaaaaaaaaaaaa1,Alice:approver:aaaaaaaaaaaaaaaa2")
	if err == nil || !strings.Contains(err.Error(), "only by case") || strings.Contains(err.Error(), "aaaaaaaa") {
		t.Fatalf("names differing by case: %v, want refused without secrets", err)
	}
	if err := ValidateTokens([]Token{{"bob", RoleOperator, "bbbbbbbbbbbbbbbb1"}, {"BOB", RoleAuditor, "bbbbbbbbbbbbbbbb2"}}); err == nil {
		t.Fatal("ValidateTokens accepted names differing by case")
	}
	if _, err := ParseTokens("sam:operator:ssssssssssssssss1,sam:approver:ssssssssssssssss2"); err != nil {
		t.Fatalf("one name, two roles: %v", err)
	}
}
