package docs

import (
	"os/exec"
	"testing"
)

// TestPrometheusAlertsFireAsDescribed checks the alerting rules with
// promtool, the Prometheus project's own tool, and runs their unit tests:
// each alert fires on the series it is meant for, after its for:, and not
// on the others.
func TestPrometheusAlertsFireAsDescribed(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run scripts/install-deps.sh, which installs Debian's prometheus package")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
