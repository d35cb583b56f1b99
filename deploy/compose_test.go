package deploy

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of the compose schema the checks read.
type composeFile struct {
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	ReadOnly bool `json:"read_only"`
}

// checkCompose returns every way compose.yaml breaks what docs/deploy.md
// says of it.
func checkCompose(raw []byte) []string {
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	redis := strings.Join(c.Services["redis"].Command, " ")
	for _, want := range []string{"--appendonly yes", "--appendfsync always", "--maxmemory-policy noeviction"} {
		if !strings.Contains(redis, want) {
			bad("redis: command %q lacks %s", redis, want)
		}
	}
	depends := func(service, on, condition string) {
		if got := c.Services[service].DependsOn[on].Condition; got != condition {
			bad("%s: waits for %s to be %q, want %s", service, on, got, condition)
		}
	}
	depends("migrate", "postgres", "service_healthy")
	depends("serve", "migrate", "service_completed_successfully")
	depends("serve", "redis", "service_healthy")
	if cmd := c.Services["migrate"].Command; !slices.Equal(cmd, []string{"migrate"}) {
		bad("migrate: runs %v", cmd)
	}
	serve := c.Services["serve"]
	if len(serve.Command) == 0 || serve.Command[0] != "serve" {
		bad("serve: runs %v", serve.Command)
	}
	if got := serve.Environment["INVLEDGER_LISTEN"]; got != "0.0.0.0:8080" {
		bad("serve: INVLEDGER_LISTEN is %q, want 0.0.0.0:8080", got)
	}
	// A secret is the user's shell variable, interpolated, never a literal.
	fromShell := regexp.MustCompile(`^\$\{[A-Z_]+:\?[^}]*\}$`)
	for _, secret := range []string{"INVLEDGER_TOKENS", "INVLEDGER_SEAL_KEYS"} {
		if got := serve.Environment[secret]; !fromShell.MatchString(got) {
			bad("serve: %s is %q, not taken from the shell", secret, got)
		}
	}
	for name, s := range c.Services {
		for k, v := range s.Environment {
			if m := credentialsInURL.FindString(v); m != "" && !strings.Contains(m, "${") {
				bad("%s: %s has a literal password", name, k)
			}
		}
		if (name == "serve" || name == "migrate") && !s.ReadOnly {
			bad("%s: root filesystem is writable", name)
		}
	}
	return problems
}

// TestComposeFile: compose.yaml runs Redis with AOF fsynced on every write,
// migrates before serve starts, and holds no secret. CI has no container
// runtime: the file is parsed and checked, not run.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkCompose(raw) {
		t.Error(p)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"appendfsync everysec", `"--appendfsync", "always"`, `"--appendfsync", "everysec"`, "--appendfsync always"},
		{"no AOF", `"--appendonly", "yes", `, ``, "--appendonly yes"},
		{"serve only waits for migrate to start", "condition: service_completed_successfully", "condition: service_started", "migrate to be"},
		{"a literal token", "INVLEDGER_TOKENS: ${INVLEDGER_TOKENS:?export INVLEDGER_TOKENS=name:role:secret,... first}",
			"INVLEDGER_TOKENS: shop:gateway:0123456789abcdef", "INVLEDGER_TOKENS"},
		{"a literal password", "${POSTGRES_PASSWORD:?export POSTGRES_PASSWORD first}@postgres", "hunter2@postgres", "literal password"},
		{"listen on loopback", "INVLEDGER_LISTEN: 0.0.0.0:8080", "INVLEDGER_LISTEN: 127.0.0.1:8080", "INVLEDGER_LISTEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutated := strings.Replace(string(raw), tc.old, tc.new, 1)
			if mutated == string(raw) {
				t.Fatalf("compose.yaml has no %q to change", tc.old)
			}
			problems := checkCompose([]byte(mutated))
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("no problem names %q; got %q", tc.want, problems)
			}
		})
	}
}
