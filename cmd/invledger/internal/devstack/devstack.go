// Package devstack holds the credentials of `invledger dev`: the tokens
// file kept in its directory and the shell lines that export them.
package devstack

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Env is the shell lines that export the dev stack's API URL and each
// role's secret (API, OP, GW, AU, AP, as the examples of docs/api.md use them),
// and the URLs the CLI reads. tokens is Tokens' name:role:secret lines.
func Env(api, redisURL, databaseURL, tokens string) string {
	secrets := map[string]string{}
	for _, line := range strings.Split(tokens, "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 {
			secrets[f[1]] = f[2]
		}
	}
	return fmt.Sprintf("export API=%s OP=%s GW=%s AU=%s AP=%s\nexport INVLEDGER_API_URL=%s INVLEDGER_REDIS_URL='%s' INVLEDGER_DATABASE_URL='%s'\n",
		api, secrets["operator"], secrets["gateway"], secrets["auditor"], secrets["approver"], api, redisURL, databaseURL)
}

// Tokens reads the tokens file in dir, or writes one with a fresh random
// secret per role, so a restarted dev stack keeps its credentials.
func Tokens(dir string) (string, error) {
	path := filepath.Join(dir, "tokens")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var entries []string
	for _, role := range []string{"gateway", "operator", "approver", "auditor"} {
		secret := make([]byte, 16)
		if _, err := rand.Read(secret); err != nil {
			return "", err
		}
		entries = append(entries, fmt.Sprintf("dev-%s:%s:%s", role, role, hex.EncodeToString(secret)))
	}
	tokens := strings.Join(entries, "\n")
	if err := os.WriteFile(path, []byte(tokens+"\n"), 0o600); err != nil {
		return "", err
	}
	return tokens, nil
}
