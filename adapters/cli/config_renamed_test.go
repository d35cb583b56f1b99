package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestRenamedSettingsKeepTheirOldNamesForOneRelease: 1.0.0's --batch-size
// and INVLEDGER_BATCH_SIZE still set the projector's commit size, with a
// warning, and the new names win over the old.
func TestRenamedSettingsKeepTheirOldNamesForOneRelease(t *testing.T) {
	commitSize := func(env map[string]string, args ...string) (string, string) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		serve, _, err := NewRootCmd().Find([]string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		if err := serve.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		var warned bytes.Buffer
		serve.SetErr(&warned)
		if err := serve.PreRunE(serve, nil); err != nil {
			t.Fatal(err)
		}
		return serve.Flags().Lookup("commit-size").Value.String(), warned.String()
	}
	if got, warned := commitSize(nil, "--batch-size", "7"); got != "7" || warned != "" {
		t.Errorf("--batch-size 7: commit size %s, warned %q", got, warned)
	}
	if got, warned := commitSize(map[string]string{"INVLEDGER_BATCH_SIZE": "9"}); got != "9" || !strings.Contains(warned, "INVLEDGER_BATCH_SIZE is deprecated") || !strings.Contains(warned, "INVLEDGER_COMMIT_SIZE") {
		t.Errorf("INVLEDGER_BATCH_SIZE=9: commit size %s, warned %q", got, warned)
	}
	if got, _ := commitSize(map[string]string{"INVLEDGER_BATCH_SIZE": "9", "INVLEDGER_COMMIT_SIZE": "11"}); got != "11" {
		t.Errorf("both variables: commit size %s, want the new one's 11", got)
	}
	serve, _, _ := NewRootCmd().Find([]string{"serve"})
	if f := serve.Flags().Lookup("batch-size"); f == nil || f.Deprecated == "" || !f.Hidden {
		t.Errorf("--batch-size is not a hidden, deprecated alias: %+v", f)
	}
}
