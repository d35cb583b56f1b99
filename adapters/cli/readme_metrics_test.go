package cli

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

// ourMetric matches the families docs/observability.md's table lists: invledger's
// own and go_build_info, not the Go runtime's and the process's.
var ourMetric = regexp.MustCompile(`^(invledger_[a-z_]+|go_build_info)$`)

// TestDocsListEveryMetric compares docs/observability.md's metric table with the
// families app.New registers (every collector's descriptions) and with what a
// freshly started serve exposes on /metrics before anything happened: the
// table lists exactly the registered families, and a family is marked
// "from the start" exactly when it is already there.
func TestDocsListEveryMetric(t *testing.T) {
	t.Parallel()
	localstacktest.SkipShort(t)
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{} // name → on /metrics from the start
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|[^|]*\\| ([^|]*) \\|").FindAllStringSubmatch(string(doc), -1) {
		if ourMetric.MatchString(m[1]) {
			listed[m[1]] = m[2] == "from the start"
		}
	}

	api, stack, _ := startServeStack(t, "ops:operator:operator-secret-0001")
	reg := app.NewRegistry()
	a, err := app.New(context.Background(), app.Config{RedisURL: stack.Redis.URL(), DatabaseURL: stack.DatabaseURL,
		Registry: reg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	descs := make(chan *prometheus.Desc)
	go func() { reg.Describe(descs); close(descs) }()
	var registered []string
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && ourMetric.MatchString(m[1]) {
			registered = append(registered, m[1])
		}
	}
	for _, name := range registered {
		if _, ok := listed[name]; !ok {
			t.Errorf("the application registers %s, which docs/observability.md's metric table does not list", name)
		}
	}
	for name := range listed {
		if !slices.Contains(registered, name) {
			t.Errorf("docs/observability.md lists %s, which the application does not register", name)
		}
	}

	// Before anything happened: the new application has run nothing, and
	// the serve has only just started.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	scraped := string(scrape(t, api+"/metrics"))
	for name, fromStart := range listed {
		gathered := slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == name })
		switch {
		case fromStart && !gathered:
			t.Errorf("docs/observability.md says %s is on /metrics from the start; a new application has no series of it", name)
		case fromStart && !strings.Contains(scraped, "\n# TYPE "+name+" "):
			t.Errorf("docs/observability.md says %s is on /metrics from the start; a fresh serve's lacks it", name)
		case !fromStart && gathered:
			t.Errorf("a new application has series of %s; docs/observability.md should say it is on /metrics from the start", name)
		}
	}
}
