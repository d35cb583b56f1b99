package redisinventory

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A call that names a hold twice would end it twice; hold_end.lua refuses
// it before any write, even for an expire, whose refusals of a missing
// hold otherwise drop the expiry entry.
func TestHoldEndRefusesAHoldNamedTwiceBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, keys := privateRedis(t)
	hk := keys.HoldKeys("sku-1")
	if err := client.ZAdd(ctx, hk[3], redis.Z{Score: 1, Member: "sku-1 h1"}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, action := range []holdAction{actionExpire, actionCancel, actionConfirm} {
		err := holdEndScript.Run(ctx, client, hk, "sku-1", string(action), "h1", "e1", "h1", "e2").Err()
		if err == nil || !strings.Contains(err.Error(), "named twice") {
			t.Errorf("%s naming h1 twice = %v, want refused", action, err)
		}
	}
	if n := client.ZCard(ctx, hk[3]).Val(); n != 1 {
		t.Fatalf("expiry set has %d entries after the refusals, want 1", n)
	}
	if n := client.DBSize(ctx).Val(); n != 1 {
		t.Fatalf("%d keys after the refusals, want only the expiry set", n)
	}
}
