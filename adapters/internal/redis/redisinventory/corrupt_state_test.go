package redisinventory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
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

// TestAdjustAndCloseOfACorruptSKUAnswerUnavailable damages a SKU's stock,
// then its hash's type: an adjustment and a close answer the corrupt
// SKU's 503, naming the key, and write nothing, where they used to fail
// inside the script with a 500.
func TestAdjustAndCloseOfACorruptSKUAnswerUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, keys := privateRedis(t)
	inv, err := NewRedisInventory(client, keys, InventoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	archiver := NewRedisArchiver(client, keys)
	id, _ := domain.NewSKUID("mended")
	def, _ := domain.NewSKUDefinition(id, 10, 1)
	if _, _, err := inv.Warm(ctx, def, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	key := keys.SKUKey("mended")
	for _, damage := range []func() error{
		func() error { return client.HSet(ctx, key, "stock", "abc").Err() },
		func() error { return client.Set(ctx, key, "not-a-hash", 0).Err() },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		before := client.XLen(ctx, keys.SKUStreamKey("mended")).Val()
		_, adjustErr := inv.Adjust(ctx, id, 1, 5, uuid.NewString(), "op", "recount")
		_, _, closeErr := archiver.CloseSKU(ctx, id, uuid.NewString(), "op")
		for name, err := range map[string]error{"adjust": adjustErr, "close": closeErr} {
			ce, ok := errors.AsType[*ledger.CorruptRecordError](err)
			if !ok || !errors.Is(err, domain.ErrCorruptRecord) || ce.Record.Kind != ledger.RecordSKU || ce.Record.Key != key {
				t.Errorf("%s of a sku whose state does not read: %v, want a corrupt sku state naming %s", name, err, key)
			}
		}
		if after := client.XLen(ctx, keys.SKUStreamKey("mended")).Val(); after != before {
			t.Errorf("%d events appended over a corrupt state", after-before)
		}
	}
}
