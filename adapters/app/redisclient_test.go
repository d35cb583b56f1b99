package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

const testPassword = "s3cret-PW-42"

// TestRedisSettingsSelectTheTopology: each way of naming a Redis gives the
// client of its topology with the credentials, TLS and addresses given.
func TestRedisSettingsSelectTheTopology(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		check func(t *testing.T, c redis.UniversalClient)
	}{
		{"url with user, password and TLS", Config{RedisURL: "rediss://app:" + testPassword + "@redis.example:6380/2"},
			func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Username != "app" || o.Password != testPassword || o.TLSConfig == nil || o.DB != 2 || o.Addr != "redis.example:6380" {
					t.Fatalf("options: %+v", o)
				}
			}},
		{"cluster seeds", Config{RedisCluster: []string{"10.0.0.1:7000", "10.0.0.2:7000"}},
			func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.ClusterClient).Options()
				if len(o.Addrs) != 2 || o.Password != "" {
					t.Fatalf("options: %+v", o)
				}
			}},
		{"cluster URL", Config{RedisCluster: []string{"rediss://app:" + testPassword + "@10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000"}},
			func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.ClusterClient).Options()
				if len(o.Addrs) != 3 || o.Username != "app" || o.Password != testPassword || o.TLSConfig == nil || !o.ContextTimeoutEnabled {
					t.Fatalf("options: %+v", o)
				}
			}},
		{"sentinels with the master's password from the URL", Config{RedisSentinels: []string{"10.0.0.1:26379", "10.0.0.2:26379"},
			RedisSentinelMaster: "sales", RedisURL: "redis://:" + testPassword + "@ignored:1/3"},
			func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Password != testPassword || o.DB != 3 || o.Addr != "FailoverClient" {
					t.Fatalf("options: %+v", o)
				}
			}},
		{"failover URL", Config{RedisSentinels: []string{"redis://:" + testPassword + "@10.0.0.1:26379?master_name=sales&addr=10.0.0.2:26379"}},
			func(t *testing.T, c redis.UniversalClient) {
				if o := c.(*redis.Client).Options(); o.Password != testPassword {
					t.Fatalf("options: %+v", o)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.validateRedis(); err != nil {
				t.Fatal(err)
			}
			c, err := NewRedisClient(tc.cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tc.check(t, c)
			if target := tc.cfg.RedisTarget(); strings.Contains(target, testPassword) {
				t.Fatalf("RedisTarget shows the password: %s", target)
			}
		})
	}
}

// TestBadRedisSettingsNameTheFieldAndHideThePassword: each mistake is an
// error naming the flag and variable, and no error quotes a password.
func TestBadRedisSettingsNameTheFieldAndHideThePassword(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{RedisURL: "redis://u:" + testPassword + "@host:port:bad/0"}, "INVLEDGER_REDIS_URL"},
		{Config{RedisURL: "http://u:" + testPassword + "@host/0"}, "INVLEDGER_REDIS_URL"},
		{Config{RedisCluster: []string{"redis://u:" + testPassword + "@h:1?bogus=1"}}, "INVLEDGER_REDIS_CLUSTER"},
		{Config{RedisCluster: []string{"h1:1", "redis://u:" + testPassword + "@h:1"}}, "INVLEDGER_REDIS_CLUSTER"},
		{Config{RedisCluster: []string{"no-port"}}, "INVLEDGER_REDIS_CLUSTER"},
		{Config{RedisSentinels: []string{"h:26379"}}, "INVLEDGER_REDIS_SENTINEL_MASTER"},
		{Config{RedisSentinels: []string{"redis://:" + testPassword + "@h:26379"}}, "master_name"},
		{Config{RedisSentinels: []string{"h:26379"}, RedisSentinelMaster: "m", RedisURL: "redis://:" + testPassword + "@%zz"}, "INVLEDGER_REDIS_URL"},
		{Config{RedisSentinels: []string{"h:26379"}, RedisSentinelMaster: "m", RedisCluster: []string{"h:1"}}, "exclusive"},
		{Config{RedisSentinelMaster: "m"}, "INVLEDGER_REDIS_SENTINELS"},
	} {
		err := tc.cfg.validateRedis()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), testPassword) {
			t.Errorf("the error shows the password: %v", err)
		}
		if _, err := NewRedisClient(tc.cfg, 0); err == nil {
			t.Errorf("%+v: NewRedisClient accepted it", tc.cfg)
		}
	}
}

// FuzzRedisSettingsNeverShowThePassword: whatever surrounds a password in
// a Redis URL, neither the validation error nor RedisTarget repeats it.
func FuzzRedisSettingsNeverShowThePassword(f *testing.F) {
	f.Add("redis://", "host:6379/0", "pw-12345678")
	f.Add("rediss://", "h:1?addr=h2:2", "p%40ss-word")
	f.Add("redis://", "[::1:6379", "secret-secret")
	f.Fuzz(func(t *testing.T, scheme, rest, password string) {
		if len(password) < 8 || strings.ContainsAny(password, "@/:?#[]%") || strings.Contains(scheme+rest, password) {
			return
		}
		// What the settings show with another password of the same length:
		// the password's text may come from the rest of the URL, escaped
		// (a host "# 000" shows as "%20000"), not from the password.
		other := strings.Repeat("Q", len(password))
		if strings.Contains(password, "Q") {
			other = strings.Repeat("R", len(password))
		}
		shows := func(pw string) []string {
			raw := scheme + "user:" + pw + "@" + rest
			var out []string
			for _, cfg := range []Config{
				{RedisURL: raw},
				{RedisCluster: []string{raw}},
				{RedisSentinels: []string{raw}},
				{RedisSentinels: []string{"h:1"}, RedisSentinelMaster: "m", RedisURL: raw},
			} {
				err := cfg.validateRedis()
				out = append(out, fmt.Sprint(err), cfg.RedisTarget())
			}
			return out
		}
		withOther := shows(other)
		for i, shown := range shows(password) {
			if strings.Contains(shown, password) && !strings.Contains(withOther[i], password) {
				t.Fatalf("the settings show the password: %s", shown)
			}
		}
	})
}
