package server

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestTokensFileReloadsOnSIGHUP rewrites the tokens file under a serving
// API and sends the process SIGHUP: the new secret works and the old one
// no longer does. A bad file is refused with an ERROR line, and the
// tokens in use stay. No other test of this package handles SIGHUP.
func TestTokensFileReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	const (
		oldSecret = "auditor-secret-old-01"
		newSecret = "auditor-secret-new-01"
	)
	st := stacktest.New(t)
	logs := &logLines{seen: make(chan struct{}, 1)}
	st.App.Log = slog.New(logs)
	file := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, file, "# auditors\naudrey:auditor:"+oldSecret+"\n")
	api := startServe(t, st, Config{TokensFile: file})
	probe := func(secret string) int { return call(t, "GET", api+"/v1/skus/none", secret, "").status }
	if got := probe(oldSecret); got != 404 {
		t.Fatalf("old secret before reload: %d, want 404", got)
	}

	writeFile(t, file, "audrey:auditor:"+newSecret+"\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "INFO tokens reloaded")
	if got := probe(newSecret); got != 404 {
		t.Fatalf("new secret after reload: %d, want 404", got)
	}
	if got := probe(oldSecret); got != 401 {
		t.Fatalf("old secret after reload: %d, want 401", got)
	}

	writeFile(t, file, "audrey:auditor:short\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "ERROR tokens reload refused")
	if got := probe(newSecret); got != 404 {
		t.Fatalf("secret in use after a bad file: %d, want 404", got)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeWithoutTokensStartsNothing asks for every component without
// tokens: Serve fails at once, naming the tokens, and has started
// nothing: no listener, no projector consumer group, no reconciliation.
func TestServeWithoutTokensStartsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	start := time.Now()
	err = Serve(ctx, st.App, Config{Listen: addr, OnListening: func(string) { t.Error("the API listened") }})
	if err == nil || !strings.Contains(err.Error(), "INVLEDGER_TOKENS") {
		t.Fatalf("err = %v, want one naming INVLEDGER_TOKENS", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("failing took %v", took)
	}
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Fatalf("the API's address is taken: %v", err)
	} else {
		ln.Close()
	}
	for _, stream := range st.Keyspace.StreamKeys() {
		if groups, err := st.RedisClient.XInfoGroups(ctx, stream).Result(); err == nil && len(groups) > 0 {
			t.Fatalf("stream %s has consumer groups %v", stream, groups)
		}
	}
	var runs int
	if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Fatalf("reconciliation runs: %d, %v", runs, err)
	}
}
