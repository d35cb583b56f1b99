// Package devstack holds the credentials of `invledger dev`: the tokens
// and seal key files kept in its directory and the shell lines that export
// them.
package devstack

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Env is the shell lines that export what the examples of the docs use:
// the dev stack's API URL and each role's secret (API, OP, GW, AU, AP, as
// docs/api.md's curls name them); the URLs and seal key the CLI reads; the
// CLI's API token (INVLEDGER_API_TOKEN, the operator's, for adjust); and
// the PHP client's URL and token (INVLEDGER_URL, INVLEDGER_TOKEN, the
// gateway's, as docs/php.md and the Laravel config read them). tokens is
// Tokens' name:role:secret lines, sealKeys SealKeys' id:secret.
func Env(api, redisURL, databaseURL, tokens, sealKeys string) string {
	secrets := map[string]string{}
	for _, line := range strings.Split(tokens, "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 {
			secrets[f[1]] = f[2]
		}
	}
	return fmt.Sprintf("export API=%s OP=%s GW=%s AU=%s AP=%s\n"+
		"export INVLEDGER_API_URL=%s INVLEDGER_REDIS_URL='%s' INVLEDGER_DATABASE_URL='%s' INVLEDGER_SEAL_KEYS='%s'\n"+
		"export INVLEDGER_API_TOKEN=%s INVLEDGER_URL=%s INVLEDGER_TOKEN=%s\n",
		api, secrets["operator"], secrets["gateway"], secrets["auditor"], secrets["approver"],
		api, redisURL, databaseURL, sealKeys,
		secrets["operator"], api, secrets["gateway"])
}

// Tokens reads the tokens file in dir, or writes one with a fresh random
// secret per role, so a restarted dev stack keeps its credentials.
func Tokens(dir string) (string, error) {
	return keep(filepath.Join(dir, "tokens"), func() (string, error) {
		var entries []string
		for _, role := range []string{"gateway", "operator", "approver", "auditor"} {
			secret, err := randomHex(16)
			if err != nil {
				return "", err
			}
			entries = append(entries, fmt.Sprintf("dev-%s:%s:%s", role, role, secret))
		}
		return strings.Join(entries, "\n"), nil
	})
}

// SealKeys reads the seal key file in dir, or writes one with a fresh
// random key, dev:<64 hex digits>, so a restarted dev stack verifies what
// it sealed before.
func SealKeys(dir string) (string, error) {
	return keep(filepath.Join(dir, "seal-keys"), func() (string, error) {
		secret, err := randomHex(32)
		return "dev:" + secret, err
	})
}

// keep returns the trimmed content of the file at path, or writes the one
// fresh makes there, readable by its owner alone.
func keep(path string, fresh func() (string, error)) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	v, err := fresh()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", err
	}
	return v, nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
