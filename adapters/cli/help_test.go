package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// walk calls f on c and every command below it, cobra's own help and
// completion commands aside.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	if c.Name() == "help" || c.Name() == "completion" {
		return
	}
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// TestEveryCommandHasAnExample: the help of every command that does
// something shows an Example section that runs it, and says which of its
// flags are required (F3).
func TestEveryCommandHasAnExample(t *testing.T) {
	walk(NewRootCmd(), func(c *cobra.Command) {
		if c.HasSubCommands() {
			return // a group: its help lists its commands
		}
		if !strings.Contains(c.Example, c.CommandPath()) {
			t.Errorf("%s: Example %q does not show the command", c.CommandPath(), c.Example)
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			_, required := f.Annotations[cobra.BashCompOneRequiredFlag]
			if required != strings.HasSuffix(f.Usage, "(required)") {
				t.Errorf("%s --%s: required %v, but help says %q", c.CommandPath(), f.Name, required, f.Usage)
			}
		})
	})
}

// TestUnknownSubcommandsExit64WithUsage: in every command group, an
// unknown subcommand exits with the usage status and the group's usage on
// stderr, never with its help and status 0.
func TestUnknownSubcommandsExit64WithUsage(t *testing.T) {
	walk(NewRootCmd(), func(c *cobra.Command) {
		if !c.HasSubCommands() {
			return
		}
		args := append(strings.Fields(c.CommandPath())[1:], "no-such-command")
		code, stdout, stderr := runMain(args...)
		if code != exitUsage || !strings.Contains(stderr, "Usage:") || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and the usage on stderr", args, code, stdout, stderr, exitUsage)
		}
	})
}

// TestRequiredFlagsAreUsageErrors: a required flag left out is a usage
// error that names it, before anything connects (F3).
func TestRequiredFlagsAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"sku", "create", "s1"}, "stock"},
		{[]string{"deduct", "--user", "u1"}, "sku"},
		{[]string{"release", "--sku", "s1", "--user", "u1"}, "request-id"},
		{[]string{"adjust", "request", "--sku", "s1", "--delta", "1"}, "reason"},
		{[]string{"dead-letters", "resolve", "1"}, "note"},
		{[]string{"audit", "balance-at", "s1"}, "at"},
	} {
		code, _, stderr := runMain(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, `"`+tc.flag+`"`) || !strings.Contains(stderr, "Usage:") {
			t.Errorf("%v: exit %d, stderr %q; want %d naming --%s", tc.args, code, stderr, exitUsage, tc.flag)
		}
	}
}

// runMain runs the CLI as main does, against no server.
func runMain(args ...string) (code int, stdout, stderr string) {
	root := NewRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	code = execute(context.Background(), root, args, &errOut)
	return code, out.String(), errOut.String()
}
