package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/invledger/invledger/adapters/app"
)

// appendFsync is the Redis appendfsync a durability mode needs.
func appendFsync(durability string) string {
	if durability == app.DurabilityEverysec {
		return "everysec"
	}
	return "always"
}

// devTokens reads the tokens file in dir, or writes one with a fresh random
// secret per role, so a restarted dev stack keeps its credentials.
func devTokens(dir string) (string, error) {
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
