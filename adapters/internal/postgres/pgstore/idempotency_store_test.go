package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
)

// TestIdempotencyStoreClaims: the first claim runs, a retry gets the
// stored answer, another request with the key is a field error, a running
// claim is a conflict until it goes stale (its process died), a released
// key runs again, and the window forgets keys.
func TestIdempotencyStoreClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	s := pgstore.NewPostgresIdempotencyStore(pool)

	claimed, _, _, err := s.Claim(ctx, "olga", "k1", "fp1")
	if err != nil || !claimed {
		t.Fatalf("first claim = %v, %v; want claimed", claimed, err)
	}
	if _, _, _, err := s.Claim(ctx, "olga", "k1", "fp1"); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("claim while the first runs = %v, want ErrConflict", err)
	}
	if claimed, _, _, err := s.Claim(ctx, "adam", "k1", "fp1"); err != nil || !claimed {
		t.Fatalf("another principal's claim of the same key = %v, %v; want claimed: keys are per principal", claimed, err)
	}
	if err := s.Complete(ctx, "olga", "k1", 201, []byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	claimed, status, body, err := s.Claim(ctx, "olga", "k1", "fp1")
	if err != nil || claimed || status != 201 || string(body) != `{"id":1}` {
		t.Fatalf("retry = %v %d %s %v; want the stored 201", claimed, status, body, err)
	}
	var fe *domain.FieldError
	if _, _, _, err := s.Claim(ctx, "olga", "k1", "fp2"); !errors.As(err, &fe) || fe.Field != "Idempotency-Key" {
		t.Fatalf("the key with another request = %v, want a field error naming Idempotency-Key", err)
	}

	// A key kept under an earlier release's fingerprint of the request
	// replays it; the earlier fingerprint never matches another request.
	if claimed, status, _, err := s.Claim(ctx, "olga", "k1", "fp1-now", "fp1"); err != nil || claimed || status != 201 {
		t.Fatalf("retry fingerprinted as now and as before = %v %d %v; want the stored 201", claimed, status, err)
	}
	if _, _, _, err := s.Claim(ctx, "olga", "k1", "fp2-now", "fp2"); !errors.As(err, &fe) {
		t.Fatalf("another request under both fingerprints = %v, want a field error", err)
	}

	// A claim whose process died blocks the key for a minute, then a retry
	// takes it over.
	if claimed, _, _, err := s.Claim(ctx, "olga", "k2", "fp"); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = created_at - interval '2 minutes' WHERE key = 'k2'`); err != nil {
		t.Fatal(err)
	}
	if claimed, _, _, err := s.Claim(ctx, "olga", "k2", "fp"); err != nil || !claimed {
		t.Fatalf("claim of a stale key = %v, %v; want claimed", claimed, err)
	}
	if err := s.Release(ctx, "olga", "k2"); err != nil {
		t.Fatal(err)
	}
	if claimed, _, _, err := s.Claim(ctx, "olga", "k2", "fp"); err != nil || !claimed {
		t.Fatalf("claim of a released key = %v, %v; want claimed", claimed, err)
	}

	n, err := s.DeleteBefore(ctx, time.Now().Add(time.Minute))
	if err != nil || n != 3 {
		t.Fatalf("DeleteBefore = %d, %v; want the 3 keys", n, err)
	}
}
