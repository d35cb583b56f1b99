package redisinventory

import (
	"context"
	"strings"
	"testing"
)

// TestLiveFaultAgreesWithTheScripts writes SKU hashes whose live fields
// read or do not, and checks that liveFault (the reconciler's and
// Quarantine's reading) and sku_fault (state.lua's, the scripts') agree on
// each, naming the same field.
func TestLiveFaultAgreesWithTheScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, keys := privateRedis(t)
	sound := map[string]string{"stock": "5", "limit": "1", "status": "open", "fence": "f", "seq": "3"}
	cases := []struct {
		field, value string // value "" deletes the field
		fault        string
	}{
		{"", "", ""},
		{"status", "closed", ""},
		{"held", "2", ""},
		{"stock", "abc", "stock"},
		{"stock", "", "stock"},
		{"limit", "lots", "limit"},
		{"status", "paused", "status"},
		{"status", "", "status"},
		{"seq", "x1", "seq"},
		{"held", "h", "held"},
		{"holds", "-", "holds"},
	}
	for _, c := range cases {
		key := keys.SKUKey("agree")
		values := map[string]any{}
		for f, v := range sound {
			values[f] = v
		}
		if c.field != "" {
			values[c.field] = c.value
		}
		if err := client.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		for f, v := range values {
			if v != "" {
				if err := client.HSet(ctx, key, f, v).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		read, err := client.HMGet(ctx, key, liveFields...).Result()
		if err != nil {
			t.Fatal(err)
		}
		goFault := liveFault(read)
		_, luaErr := stateScript.Run(ctx, client, []string{key}).Slice()
		switch {
		case c.fault == "" && (goFault != "" || luaErr != nil):
			t.Errorf("%s=%q reads, but liveFault says %q and state.lua %v", c.field, c.value, goFault, luaErr)
		case c.fault != "" && (!strings.HasPrefix(goFault, c.fault+" is") || luaErr == nil ||
			!strings.Contains(luaErr.Error(), malformedSKUState+c.fault+" is")):
			t.Errorf("%s=%q does not read: liveFault says %q and state.lua %v, want both to name %s", c.field, c.value, goFault, luaErr, c.fault)
		}
	}
}
