package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

// Config holds the settings shared by every command. Each one is a flag
// whose default comes from its INVLEDGER_* environment variable.
type Config struct {
	RedisURL            string
	RedisCluster        []string
	RedisSentinels      []string
	RedisSentinelMaster string
	DatabaseURL         string
	Partitions          int
	LogLevel            string
	LogFormat           string
	// RedisTimeout is --redis-timeout, the purchase path's deadline.
	RedisTimeout time.Duration
	// MaxBatch is --max-batch, the most attempts of one SKU in one script call.
	MaxBatch int
	// BatchesInFlight is --batches-in-flight, the calls in flight a hot
	// partition may have (redisinventory.InventoryConfig.BatchesInFlight).
	BatchesInFlight int
	// StreamEntries is --stream-entries, per-call or per-event.
	StreamEntries string
	// SKULayout is --sku-layout, one-hash or three-hashes.
	SKULayout string
	// Durability is serve's --durability; other commands run strict.
	Durability string
	Holds      domain.HoldConfig // --hold-max-ttl, --hold-default-ttl
	// SealKeys is --seal-keys: serve seals with the first, audit verify
	// checks with them all.
	SealKeys string
}

// setDefaults fills what the flags would for a Config built in code; the
// application defaults the rest.
func (c *Config) setDefaults() {
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.LogFormat == "" {
		c.LogFormat = "text"
	}
}

// Validate reports every invalid setting at once, naming flag and variable.
func (c Config) Validate() error {
	_, err := app.NewLogger(os.Stderr, c.LogLevel, c.LogFormat)
	return errors.Join(err, c.AppConfig().Validate())
}

// AppConfig is the application's configuration for these settings.
func (c Config) AppConfig() app.Config {
	return app.Config{RedisURL: c.RedisURL, RedisCluster: c.RedisCluster, RedisSentinels: c.RedisSentinels,
		RedisSentinelMaster: c.RedisSentinelMaster, DatabaseURL: c.DatabaseURL,
		Partitions: c.Partitions, Durability: c.Durability, RedisTimeout: c.RedisTimeout, MaxBatch: c.MaxBatch,
		BatchesInFlight: c.BatchesInFlight, StreamEntries: streamentry.StreamEntries(c.StreamEntries),
		SKULayout: c.SKULayout, Holds: c.Holds, SealKeys: c.SealKeys, Logger: c.Logger()}
}

// Logger logs to stderr as --log-level and --log-format say; Validate
// reports a bad one first, and text at info stands in for it.
func (c Config) Logger() *slog.Logger {
	if l, err := app.NewLogger(os.Stderr, c.LogLevel, c.LogFormat); err == nil {
		return l
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

// EnvFlags registers flags whose defaults come from the environment and
// remembers malformed variables, so the command can report them by name
// instead of silently ignoring them.
type EnvFlags struct {
	fs      *pflag.FlagSet
	errs    []error
	notices []string
}

// NewEnvFlags registers its flags on fs; a command reports Err before it runs.
func NewEnvFlags(fs *pflag.FlagSet) *EnvFlags { return &EnvFlags{fs: fs} }

// usage says which variable sets the flag, and whether it is set.
func (e *EnvFlags) usage(usage, env string) string {
	if _, set := os.LookupEnv(env); set {
		return usage + " (env " + env + ", set)"
	}
	return usage + " (env " + env + ")"
}

func (e *EnvFlags) String(p *string, name, env, def, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	e.fs.StringVar(p, name, def, e.usage(usage, env))
}

// Secret registers a flag holding a secret. Its value comes from env like
// any other's, but help shows only whether env is set, never the value.
func (e *EnvFlags) Secret(p *string, name, env, usage string) {
	v, set := os.LookupEnv(env)
	origin := " (env " + env + ")"
	if set {
		origin = " (env " + env + ", set, hidden)"
	}
	e.fs.StringVar(p, name, v, usage+origin)
	e.fs.Lookup(name).DefValue = ""
}

// URL registers a flag holding a server URL, which may carry a password:
// help shows the URL with the password masked.
func (e *EnvFlags) URL(p *string, name, env, def, usage string) {
	e.String(p, name, env, def, usage)
	f := e.fs.Lookup(name)
	f.DefValue = app.RedactURL(f.DefValue)
}

func (e *EnvFlags) StringSlice(p *[]string, name, env string, usage string) {
	var def []string
	if v, ok := os.LookupEnv(env); ok && strings.TrimSpace(v) != "" {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				def = append(def, part)
			}
		}
	}
	e.fs.StringSliceVar(p, name, def, e.usage(usage, env))
}

// URLSlice registers a comma-separated list that may be one URL with a
// password: help shows it masked.
func (e *EnvFlags) URLSlice(p *[]string, name, env string, usage string) {
	e.StringSlice(p, name, env, usage)
	if len(*p) > 0 {
		e.fs.Lookup(name).DefValue = "[" + app.RedactList(*p) + "]"
	}
}

func (e *EnvFlags) Int(p *int, name, env string, def int, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not an integer", env, v))
		} else {
			def = n
		}
	}
	e.fs.IntVar(p, name, def, e.usage(usage, env))
}

func (e *EnvFlags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not a duration such as 60s or 1m", env, v))
		} else {
			def = d
		}
	}
	e.fs.DurationVar(p, name, def, e.usage(usage, env))
}

func (e *EnvFlags) Err() error { return errors.Join(e.errs...) }

// Renamed is one setting's name before and after a rename.
type Renamed struct{ Flag, Env string }

// renamedEnv is the variable to read for env, which replaced old.Env: old's
// while only old's is set, so a deployment keeps working for one release.
func (e *EnvFlags) renamedEnv(env string, old Renamed) string {
	if _, set := os.LookupEnv(env); set {
		return env
	}
	if _, set := os.LookupEnv(old.Env); set {
		e.notices = append(e.notices, fmt.Sprintf("%s is deprecated and will be removed in the next release: set %s", old.Env, env))
		return old.Env
	}
	return env
}

// alias keeps old.Flag working as name, hidden from help; pflag says what
// replaced it when it is used.
func (e *EnvFlags) alias(name string, old Renamed) {
	f := e.fs.Lookup(name)
	e.fs.AddFlag(&pflag.Flag{Name: old.Flag, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue})
	_ = e.fs.MarkDeprecated(old.Flag, "use --"+name+"; it will be removed in the next release")
}

// IntRenamed is Int for a setting renamed since 1.0.0: its old flag and
// variable keep working for one release.
func (e *EnvFlags) IntRenamed(p *int, name, env string, old Renamed, def int, usage string) {
	e.Int(p, name, e.renamedEnv(env, old), def, usage)
	e.alias(name, old)
}

// DurationRenamed is Duration for a setting renamed since 1.0.0: its old
// flag and variable keep working for one release.
func (e *EnvFlags) DurationRenamed(p *time.Duration, name, env string, old Renamed, def time.Duration, usage string) {
	e.Duration(p, name, e.renamedEnv(env, old), def, usage)
	e.alias(name, old)
}

// Warn writes a line per deprecated variable in use, for the command that
// runs with these flags.
func (e *EnvFlags) Warn(w io.Writer) {
	for _, n := range e.notices {
		fmt.Fprintln(w, "invledger: warning:", n)
	}
}

// Bool registers a boolean flag whose default comes from env (true,
// false, 1, 0 and the other strconv.ParseBool spellings).
func (e *EnvFlags) Bool(p *bool, name, env string, def bool, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not a boolean such as true or false", env, v))
		} else {
			def = b
		}
	}
	e.fs.BoolVar(p, name, def, e.usage(usage, env))
}
