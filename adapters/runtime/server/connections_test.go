package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestIdleServeHoldsFewRedisConnections counts, with CLIENT LIST on a
// private Redis, the connections of an idle serve running its default
// components (api, projector, reconciler): at most 40. Managed Redis plans
// cap connections, and every serve process adds its own.
func TestIdleServeHoldsFewRedisConnections(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	st.SKU(t, "idle-1", 10, 1)
	startServe(t, st, Config{Components: Components(), Tokens: testTokens})
	ctx := context.Background()
	streams := len(st.Keyspace.StreamKeys())
	// Idle: every stream has a blocked read, the reconciler's first run and
	// the epoch polls are done.
	var clients []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := st.RedisClient.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		clients = strings.Split(strings.TrimSpace(list), "\n")
		if strings.Count(list, "cmd=xreadgroup") >= streams {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projector's reads are not all blocked after 20s:\n%s", list)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	list, err := st.RedisClient.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	clients = strings.Split(strings.TrimSpace(list), "\n")
	byCmd := map[string]int{}
	for _, c := range clients {
		for _, f := range strings.Fields(c) {
			if cmd, ok := strings.CutPrefix(f, "cmd="); ok {
				byCmd[cmd]++
			}
		}
	}
	var summary []string
	for cmd, n := range byCmd {
		summary = append(summary, fmt.Sprintf("%s=%d", cmd, n))
	}
	sort.Strings(summary)
	t.Logf("%d Redis connections, by last command: %s", len(clients), strings.Join(summary, " "))
	if len(clients) > 40 {
		t.Fatalf("an idle serve holds %d Redis connections (the test's own included), want at most 40; by last command: %s",
			len(clients), strings.Join(summary, " "))
	}
}
