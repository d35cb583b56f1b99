package bench

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
)

// Config shapes `invledger-lab bench`; each field is the flag of that name.
type Config struct {
	Target  string   // lib, http or pg-direct (without --compare)
	Compare bool     // run Targets back to back on a private stack
	Targets []string // with --compare: raw, lib, http, pg-direct

	URL           string // http: the serve's base URL
	Token         string // http: a gateway token
	OperatorToken string // http: an operator token (creates, warms and reads the SKU)
	AllowRemote   bool

	Concurrency int
	Duration    time.Duration
	Requests    int64
	Stock       int64 // over all of SKUs
	SKUs        int   // lib and the seed-like script: spread the sale over this many SKUs
	Users       int
	RetryShare  float64
	RepeatShare float64

	Timeout    time.Duration // per attempt
	Drain      time.Duration // after issuing stops
	CatchUp    time.Duration // longest wait for the ledger to equal Redis
	Projector  bool          // lib: run the projector in this process
	Retire     bool          // lib: close, archive and retire the SKU after the sale, to measure Redis after it
	PGMaxConns int           // pg-direct pool size; 0: one per client as far as max_connections allows

	Durability     string // --compare: the private Redis's fsync policy
	RedisBenchmark string // --compare: the redis-benchmark binary
	Dir            string // --compare: keep the private servers' data here
	JSON           bool
	JSONOut        string // also write the JSON report to this file
	CPUProfile     string // write a pprof CPU profile of this process here
}

var (
	targetNames       = []string{"lib", "http", "pg-direct"}
	compareTargetList = []string{"raw", "lib", "http", "pg-direct"}
)

// Limits that keep a run bounded in time and memory.
const (
	maxDuration    = 10 * time.Minute
	maxRequests    = 20_000_000
	maxConcurrency = 5000
	maxUsers       = 100_000_000
	maxSKUs        = 10_000
)

// multiSKUTargets are the targets --skus above 1 can spread: the seed-like
// script runs beside raw, whose ceiling stays one idle SKU's calls.
var multiSKUTargets = []string{"raw", "lib"}

func (c *Config) setDefaults() {
	if c.Target == "" {
		c.Target = "lib"
	}
	if len(c.Targets) == 0 {
		c.Targets = compareTargetList
	}
	if c.Concurrency == 0 {
		c.Concurrency = 50
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Users == 0 {
		c.Users = 10_000_000
	}
	if c.SKUs == 0 {
		c.SKUs = 1
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Drain == 0 {
		c.Drain = 30 * time.Second
	}
	if c.CatchUp == 0 {
		c.CatchUp = 120 * time.Second
	}
	if c.Durability == "" {
		c.Durability = "strict"
	}
	if c.RedisBenchmark == "" {
		c.RedisBenchmark = "redis-benchmark"
	}
}

// Validate reports every invalid setting at once, naming its flag.
func (c Config) Validate() error {
	var errs []error
	if c.Compare {
		if len(c.Targets) == 0 {
			errs = append(errs, errors.New("--targets must name at least one of "+strings.Join(compareTargetList, ",")))
		}
		for _, t := range c.Targets {
			if !slices.Contains(compareTargetList, t) {
				errs = append(errs, fmt.Errorf("--targets: unknown target %q (known: %s)", t, strings.Join(compareTargetList, ",")))
			}
		}
		if c.Durability != "strict" && c.Durability != "everysec" {
			errs = append(errs, fmt.Errorf("--durability must be strict or everysec, got %q", c.Durability))
		}
		if c.URL != "" || c.Token != "" || c.OperatorToken != "" {
			errs = append(errs, errors.New("--compare starts its own serve: drop --url, --token and --operator-token"))
		}
		if !c.Projector && slices.Contains(c.Targets, "lib") && slices.Contains(c.Targets, "http") {
			// The http target's serve would project lib's backlog while it is measured.
			errs = append(errs, errors.New("--projector=false leaves lib's events for the http target's serve to project: compare lib and http in separate runs"))
		}
	} else {
		if !slices.Contains(targetNames, c.Target) {
			errs = append(errs, fmt.Errorf("--target must be one of %s, got %q (or use --compare)", strings.Join(targetNames, ", "), c.Target))
		}
		if c.Target == "http" {
			errs = append(errs, c.validateHTTP()...)
		}
	}
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		errs = append(errs, fmt.Errorf("--concurrency must be 1-%d, got %d", maxConcurrency, c.Concurrency))
	}
	if c.Duration <= 0 || c.Duration > maxDuration {
		errs = append(errs, fmt.Errorf("--duration must be above 0 and at most %s, got %s", maxDuration, c.Duration))
	}
	if c.Requests < 0 || c.Requests > maxRequests {
		errs = append(errs, fmt.Errorf("--requests must be 0 (no limit) to %d, got %d", maxRequests, c.Requests))
	}
	if c.Stock < 0 || c.Stock > domain.MaxQuantity {
		errs = append(errs, fmt.Errorf("--stock must be 1-%d (or 0 for the default), got %d", domain.MaxQuantity, c.Stock))
	}
	if c.SKUs < 1 || c.SKUs > maxSKUs {
		errs = append(errs, fmt.Errorf("--skus must be 1-%d, got %d", maxSKUs, c.SKUs))
	}
	if c.SKUs > 1 {
		targets := []string{c.Target}
		if c.Compare {
			targets = c.Targets
		}
		for _, t := range targets {
			if !slices.Contains(multiSKUTargets, t) {
				errs = append(errs, fmt.Errorf("--skus %d: target %s sells one SKU; spread only %s", c.SKUs, t, strings.Join(multiSKUTargets, ", ")))
			}
		}
		if c.Retire {
			errs = append(errs, errors.New("--retire measures one SKU's memory: drop it or use --skus 1"))
		}
		if c.Stock > 0 && c.Stock < int64(c.SKUs) {
			errs = append(errs, fmt.Errorf("--stock %d puts less than one unit on each of --skus %d", c.Stock, c.SKUs))
		}
	}
	if c.Users < 1 || c.Users > maxUsers {
		errs = append(errs, fmt.Errorf("--users must be 1-%d, got %d", maxUsers, c.Users))
	}
	for _, s := range []struct {
		flag string
		v    float64
	}{{"--retry-share", c.RetryShare}, {"--repeat-share", c.RepeatShare}} {
		if s.v < 0 || s.v > 0.9 {
			errs = append(errs, fmt.Errorf("%s must be between 0 and 0.9, got %g", s.flag, s.v))
		}
	}
	if c.RetryShare+c.RepeatShare > 0.9 {
		errs = append(errs, fmt.Errorf("--retry-share plus --repeat-share must be at most 0.9, got %g", c.RetryShare+c.RepeatShare))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--timeout", c.Timeout}, {"--drain", c.Drain}, {"--catch-up", c.CatchUp}} {
		if d.v <= 0 || d.v > maxDuration {
			errs = append(errs, fmt.Errorf("%s must be above 0 and at most %s, got %s", d.flag, maxDuration, d.v))
		}
	}
	if c.PGMaxConns < 0 || c.PGMaxConns > 10_000 {
		errs = append(errs, fmt.Errorf("--pg-max-conns must be 0 (automatic) to 10000, got %d", c.PGMaxConns))
	}
	return errors.Join(errs...)
}

func (c Config) validateHTTP() []error {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("--target http needs --url, the base URL of a running `invledger serve` (e.g. http://127.0.0.1:8080)"))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, fmt.Errorf("--url %q is not an http(s) base URL such as http://127.0.0.1:8080", c.URL))
	case !c.AllowRemote && !isLoopbackHost(u.Hostname()):
		errs = append(errs, fmt.Errorf("--url %s is not on this machine: bench creates SKUs and buys them, so point it at a test deployment and pass --allow-remote", c.URL))
	}
	if c.Token == "" {
		errs = append(errs, errors.New("--target http needs --token (or INVLEDGER_BENCH_TOKEN): a secret with role gateway from the serve's INVLEDGER_TOKENS"))
	}
	if c.OperatorToken == "" {
		errs = append(errs, errors.New("--target http needs --operator-token (or INVLEDGER_BENCH_OPERATOR_TOKEN): a secret with role operator, to create, warm and check the bench SKU"))
	}
	return errs
}

func isLoopbackHost(host string) bool {
	if host == "localhost" || strings.HasPrefix(host, "/") { // a Unix socket is local too
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkLocal refuses Redis and PostgreSQL on other machines unless
// --allow-remote is given.
func (c Config) checkLocal(srv Servers) error {
	if c.AllowRemote {
		return nil
	}
	var errs []error
	if c.Target == "lib" {
		for _, a := range srv.RedisAddrs {
			if host, _, err := net.SplitHostPort(a); err == nil && !isLoopbackHost(host) {
				errs = append(errs, fmt.Errorf("--redis-url %s is not on this machine: bench creates SKUs and buys them, so use a test deployment and pass --allow-remote", a))
			}
		}
	}
	if pc, err := pgxpool.ParseConfig(srv.DatabaseURL); err == nil && !isLoopbackHost(pc.ConnConfig.Host) {
		errs = append(errs, fmt.Errorf("--database-url host %s is not on this machine: bench writes to it, so use a test database and pass --allow-remote", pc.ConnConfig.Host))
	}
	return errors.Join(errs...)
}

func (c Config) spec() loadSpec {
	return loadSpec{Concurrency: c.Concurrency, Duration: c.Duration, Requests: c.Requests, Users: c.Users, SKUs: c.SKUs,
		RetryShare: c.RetryShare, RepeatShare: c.RepeatShare, Timeout: c.Timeout, Drain: c.Drain}
}

func (c Config) limitText() string {
	if c.Requests > 0 {
		return fmt.Sprintf("%d attempts or %s", c.Requests, c.Duration)
	}
	return c.Duration.String()
}
