package eventtail_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/eventtail"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
)

// TestFollowReadsEveryEventOfAnEntry: a tail reads 1.0.0's one-event
// entries and entries of several events alike, each event in its order and
// at its entry's time (the stream id's), skipping a malformed event but not
// its siblings, and the events of another SKU of the partition.
func TestFollowReadsEveryEventOfAnEntry(t *testing.T) {
	t.Parallel()
	srv := localstacktest.Redis(t)
	ctx := context.Background()
	keys, err := redisinventory.NewKeyspace(redisinventory.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	const sku, id = "tail-multi", "00000000-0000-7000-8000-00000000000"
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	stream := keys.SKUStreamKey(sku)
	// Entries of 2023, so that the time a tail reads them cannot pass
	// for theirs.
	const firstMS = 1700000000000
	for i, values := range [][]any{
		{"e", id + "1 stocked " + sku + " 1 10 10", "actor", "ops", "reason", ""},
		{"e", id + "2 deducted " + sku + " 2 1 9\n" + id + "3 deducted other 5 1 4\n" + id + "4 deducted " + sku + " x 1 8\n" +
			id + "5 deducted " + sku + " 3 2 7", "user", "a\nb\nc\nd", "request_id", "r2\nr3\nr4\nr5"},
		{"e", id + "6 deducted " + sku + " 4 1 6", "user", "e", "request_id", "r6"},
	} {
		if err := client.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: fmt.Sprintf("%d-0", firstMS+i), Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	errEnough := errors.New("enough")
	var seqs []int64
	entryOf := map[int64]int{1: 0, 2: 1, 3: 1, 4: 2} // seq -> the entry that holds it
	err = eventtail.Follow(ctx, eventtail.Config{Client: client, Keys: keys, SKU: sku, FromStart: true}, func(e domain.Event) error {
		seqs = append(seqs, e.Seq)
		if want := time.UnixMilli(firstMS + int64(entryOf[e.Seq])).UTC(); !e.OccurredAt.Equal(want) {
			t.Errorf("seq %d occurred at %s, want its entry's time %s", e.Seq, e.OccurredAt, want)
		}
		if e.Seq == 4 {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		t.Fatalf("follow: %v after seqs %v", err, seqs)
	}
	if want := []int64{1, 2, 3, 4}; !slices.Equal(seqs, want) {
		t.Fatalf("seqs %v, want %v", seqs, want)
	}
}
