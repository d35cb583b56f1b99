package cli

import (
	"os"
	"regexp"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envOfFlag is how EnvFlags names a flag's variable in its help.
var envOfFlag = regexp.MustCompile(`\(env (INVLEDGER_[A-Z0-9_]+)`)

// settingRow is a row of docs/configuration.md's settings table.
var settingRow = regexp.MustCompile("(?m)^\\| `(INVLEDGER_[A-Z0-9_]+)` \\|")

// TestDocsListEverySetting: docs/configuration.md's table has a row for
// every variable a command's flag reads, and none for a variable no flag
// reads, so a new setting cannot ship undocumented and a removed one does
// not stay in the table.
func TestDocsListEverySetting(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range settingRow.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	read := map[string]string{}
	walk(NewRootCmd(), func(c *cobra.Command) {
		note := func(f *pflag.Flag) {
			if m := envOfFlag.FindStringSubmatch(f.Usage); m != nil {
				read[m[1]] = c.CommandPath() + " --" + f.Name
			}
		}
		c.LocalFlags().VisitAll(note)
		c.PersistentFlags().VisitAll(note)
	})
	if len(read) == 0 {
		t.Fatal("no flag names its variable in its help: the pattern no longer matches EnvFlags")
	}
	for env, flag := range read {
		if !documented[env] {
			t.Errorf("%s (%s) has no row in docs/configuration.md's settings table", env, flag)
		}
	}
	for env := range documented {
		if _, ok := read[env]; !ok {
			t.Errorf("docs/configuration.md lists %s, which no flag reads", env)
		}
	}
}
