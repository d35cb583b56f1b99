package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

const testGatewayToken = "shop:gateway:0123456789abcdef0123"

// TestServeRefusesEvictingRedis: a Redis that may evict keys loses receipts,
// and a retry then buys again; serve must not start on it. A volatile-*
// policy is refused too, though receipts carry no TTL: order records and
// refusal counts do, so it would evict those.
func TestServeRefusesEvictingRedis(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl"} {
		ctx, cancel := context.WithCancel(context.Background())
		if err := s.RedisClient.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		err := Serve(ctx, s.App, Config{Components: []string{ComponentAPI}, Listen: "127.0.0.1:0", Tokens: testGatewayToken,
			OnListening: func(string) { t.Errorf("serve started listening with maxmemory-policy %s", policy); cancel() }})
		cancel()
		want := `maxmemory-policy "` + policy + `": under memory pressure Redis may evict keys invledger needs ` +
			"(with allkeys-*: receipts and buyers, and a retry would then buy again; with volatile-*: order records and refusal counts). Run CONFIG SET maxmemory-policy noeviction and set `maxmemory-policy noeviction` in redis.conf"
		if domain.CodeOf(err) != domain.CodeUnsafeRedis || !strings.Contains(err.Error(), want) {
			t.Fatalf("serve with %s = %v, want unsafe_redis saying %s", policy, err, want)
		}
	}
}

func TestEvictionCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stacktest.New(t)
	set := func(policy string) {
		t.Helper()
		if err := s.RedisClient.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
	}
	check := func() error { return checkDurability(ctx, s.RedisClient, safetyPolicy{mode: "strict"}, quiet) }
	if err := check(); err != nil {
		t.Fatalf("noeviction refused: %v", err)
	}
	for _, policy := range []string{"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"} {
		set(policy)
		if err := check(); domain.CodeOf(err) != domain.CodeUnsafeRedis {
			t.Fatalf("%s: err = %v, want unsafe_redis", policy, err)
		}
	}
}

// unsafeRecord remembers the unsafe-Redis alerts it was given.
type unsafeRecord struct {
	mu  sync.Mutex
	got []string
}

func (u *unsafeRecord) UnsafeRedis(_ context.Context, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, "unsafe: "+reason)
}

func (u *unsafeRecord) SafeRedis(context.Context) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, "safe")
}

func (u *unsafeRecord) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

// TestServeStopsSalesWhenRedisTurnsUnsafe: a serve running when someone
// switches Redis to an evicting policy stops selling (503 unsafe_redis with
// Retry-After) within a few seconds, alerts, and sells again once the
// policy is safe.
func TestServeStopsSalesWhenRedisTurnsUnsafe(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	s.SKU(t, "phone-x", 100, 100)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, s.App, Config{Components: []string{ComponentAPI}, Listen: "127.0.0.1:0", Tokens: testGatewayToken,
			RedisCheckInterval: 100 * time.Millisecond, OnListening: func(addr string) { ready <- addr }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var api string
	select {
	case addr := <-ready:
		api = "http://" + addr
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not listen")
	}
	n := 0
	buy := func() (*http.Response, string) {
		t.Helper()
		n++
		body := `{"user_id":"u1","qty":1,"request_id":"r` + strings.Repeat("x", n) + `"}`
		req, _ := http.NewRequest(http.MethodPost, api+"/v1/skus/phone-x/deduct", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer 0123456789abcdef0123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := buy(); resp.StatusCode != http.StatusOK {
		t.Fatalf("purchase on a safe Redis: %d %s", resp.StatusCode, body)
	}
	setPolicy := func(p string) {
		t.Helper()
		if err := s.RedisClient.ConfigSet(context.Background(), "maxmemory-policy", p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(status int, what string) (*http.Response, string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, body := buy()
			if resp.StatusCode == status {
				return resp, body
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %d %s after 5s", what, resp.StatusCode, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	setPolicy("allkeys-lru")
	resp, body := waitFor(http.StatusServiceUnavailable, "after switching to allkeys-lru")
	if !strings.Contains(body, `"unsafe_redis"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("want 503 unsafe_redis with Retry-After, got %v %s", resp.Header, body)
	}
	setPolicy("noeviction")
	waitFor(http.StatusOK, "after switching back to noeviction")
}

// TestSafetyWatcherAlertsOnceAndResumes drives the watcher directly with a
// recording alerter.
func TestSafetyWatcherAlertsOnceAndResumes(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	s.SKU(t, "phone-y", 10, 10)
	rec := &unsafeRecord{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- safetyWatcher{client: s.RedisClient, policy: safetyPolicy{mode: "strict"}, sales: approot.Of(s.App).Adapters.Inventory, alerts: rec,
			interval: 50 * time.Millisecond, log: slog.New(slog.NewTextHandler(io.Discard, nil))}.run(ctx)
	}()
	defer func() { cancel(); <-done }()
	waitAlerts := func(n int) []string {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if got := rec.list(); len(got) >= n {
				return got
			}
		}
		t.Fatalf("alerts = %v, want %d", rec.list(), n)
		return nil
	}
	bg := context.Background()
	if err := s.RedisClient.ConfigSet(bg, "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	got := waitAlerts(1)
	if !strings.Contains(got[0], "appendfsync always") {
		t.Fatalf("alert %q does not say what to fix", got[0])
	}
	cmd := ledger.MustDeductCommand("phone-y", "u1", 1, "r1")
	if _, err := s.Service.Deduct(bg, cmd); domain.CodeOf(err) != domain.CodeUnsafeRedis {
		t.Fatalf("deduct while unsafe: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // several checks: still one alert
	if err := s.RedisClient.ConfigSet(bg, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	if got := waitAlerts(2); len(got) != 2 || got[1] != "safe" {
		t.Fatalf("alerts = %v, want one unsafe then safe", got)
	}
	if _, err := s.Service.Deduct(bg, cmd); err != nil {
		t.Fatalf("deduct after the fix: %v", err)
	}
}

// TestDocsQuoteEveryRedisRefusal: "Against your own servers" in
// docs/configuration.md quotes, word for word, the refusal each unsafe
// Redis setting gives, with the example address it uses.
func TestDocsQuoteEveryRedisRefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stacktest.New(t)
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		mode           string
		setting, value string
		restore        string
	}{
		{"strict", "appendonly", "no", "yes"},
		{"strict", "appendfsync", "everysec", "always"},
		{"everysec", "appendfsync", "no", "always"},
		{"strict", "maxmemory-policy", "allkeys-lru", "noeviction"},
	} {
		if err := s.RedisClient.ConfigSet(ctx, tc.setting, tc.value).Err(); err != nil {
			t.Fatal(err)
		}
		err := checkDurability(ctx, s.RedisClient, safetyPolicy{mode: tc.mode}, quiet)
		if err := s.RedisClient.ConfigSet(ctx, tc.setting, tc.restore).Err(); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Fatalf("%s %s: no refusal", tc.setting, tc.value)
		}
		msg := strings.ReplaceAll(err.Error(), s.RedisClient.Options().Addr, "10.0.0.5:6379")
		if !strings.Contains(string(doc), msg) {
			t.Errorf("docs/configuration.md does not quote the refusal for %s %s:\n%s", tc.setting, tc.value, msg)
		}
	}
}

// managedUser is an ACL user that may run every command but CONFIG, as
// managed Redis services (ElastiCache, Memorystore) grant.
const managedUser, managedPassword = "app", "managed-pw-0001"

// asManagedUser makes the application connect as managedUser.
func asManagedUser(c *app.Config) {
	c.RedisURL = strings.Replace(c.RedisURL, "redis://", "redis://"+managedUser+":"+managedPassword+"@", 1)
}

// createManagedUser creates managedUser on the Redis at addr.
func createManagedUser(t *testing.T, addr string) {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.Do(context.Background(), "ACL", "SETUSER", managedUser, "on", ">"+managedPassword, "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestManagedRedisWithoutConfig runs serve as a Redis user that may not
// run CONFIG, as on ElastiCache and Memorystore, connecting with a URL
// that carries user and password. --redis-config=check refuses it, naming
// --redis-config=assume; assume starts, and says so in the log, in /readyz
// and in invledger_redis_config_assumed.
func TestManagedRedisWithoutConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t, stacktest.WithAppConfig(asManagedUser))
	createManagedUser(t, st.Redis.Addr())
	if err := st.RedisClient.ConfigGet(ctx, "appendfsync").Err(); err == nil {
		t.Fatal("CONFIG still answers; the test needs it refused")
	}
	err := checkDurability(ctx, st.RedisClient, safetyPolicy{mode: "strict"}, quiet)
	if !errors.Is(err, domain.ErrUnsafeRedis) || !strings.Contains(err.Error(), "--redis-config=assume") {
		t.Fatalf("check mode on a Redis without CONFIG: %v, want unsafe naming --redis-config=assume", err)
	}
	if err := Check(Config{Tokens: testTokens, RedisConfig: "trust"}); err == nil || !strings.Contains(err.Error(), "INVLEDGER_REDIS_CONFIG") {
		t.Fatalf("a bad --redis-config: %v", err)
	}

	logs := &logLines{seen: make(chan struct{}, 1)}
	st.App.Log = slog.New(logs)
	api := startServe(t, st, Config{Tokens: testTokens, RedisConfig: RedisConfigAssume})
	logs.waitFor(t, "persistence settings assumed")
	if r := call(t, "GET", api+"/readyz", "", ""); r.status != 200 || !strings.Contains(r.body, `"redis_config":"assumed"`) {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	if m := call(t, "GET", api+"/metrics", "", "").body; !strings.Contains(m, "\ninvledger_redis_config_assumed 1\n") {
		t.Fatalf("/metrics: %s", grepLines(m, "config_assumed"))
	}
	st.SKU(t, "managed-1", 5, 1)
	if r := call(t, "POST", api+"/v1/skus/managed-1/deduct", secretGateway, deductBody("u1", "r1")); r.status != 200 {
		t.Fatalf("deduct: %d %s", r.status, r.body)
	}
}

// TestEvictionPolicyIsCheckedWithoutConfig: with CONFIG refused and
// persistence assumed, an eviction policy that may drop receipts is still
// refused, from INFO memory.
func TestEvictionPolicyIsCheckedWithoutConfig(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t, stacktest.WithAppConfig(asManagedUser), stacktest.WithRedisConfig(func(c *localstack.RedisConfig) {
		c.Settings = map[string]string{"maxmemory-policy": "allkeys-lru"}
	}))
	createManagedUser(t, st.Redis.Addr())
	err := checkDurability(context.Background(), st.RedisClient, safetyPolicy{mode: "strict", assume: true}, quiet)
	if !errors.Is(err, domain.ErrUnsafeRedis) || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("assume mode with allkeys-lru: %v, want unsafe naming the policy", err)
	}
}

// quiet is a logger whose lines nobody reads.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
