package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/seal"
)

// Seal keys of the tests: k2 is the newer, k1 the older.
const (
	sealKey1 = "k1:0123456789abcdef0123456789abcdef"
	sealKey2 = "k2:fedcba9876543210fedcba9876543210"
)

func mustSealKeys(t *testing.T, s string) domain.SealKeys {
	t.Helper()
	k, err := domain.ParseSealKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sale is a stack sealing with keys ("": unkeyed) and SKUs, each stocked
// with 10 and sold to five buyers, projected and sealed.
func sale(t *testing.T, keys string, skus ...string) *stacktest.Stack {
	t.Helper()
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.SealKeys = keys }))
	ctx := context.Background()
	for _, sku := range skus {
		s.SKU(t, sku, 10, 1)
		for i := range 5 {
			u := fmt.Sprint("u", i)
			if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, u, 1, u)); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.ProjectStreams(t)
	return s
}

// openWithKeys opens another application over s's servers with seal keys
// keys, as a serve restarted with other keys would be.
func openWithKeys(t *testing.T, s *stacktest.Stack, keys string) *app.Application {
	t.Helper()
	c := s.App.Config()
	c.SealKeys, c.Registry = keys, nil
	a, err := app.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// keyedSale is sale with keys, the heads checkpointed.
func keyedSale(t *testing.T, keys string, skus ...string) *stacktest.Stack {
	t.Helper()
	s := sale(t, keys, skus...)
	if _, _, err := s.App.Sealer.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKeyedSealsCatchAReseal is the red team's attack on the unkeyed
// chain of release 1.0.0 (issue 32): a superuser disables the ledger's
// triggers, changes the user_id of one deducted row to mallory, recomputes
// ledger_seals from that seq on with the public formula (domain.SealHash)
// and turns the triggers back on. With keyed seals verify names the edited
// seq. So it does for a row deleted with its seal, the later seals
// re-linked, and for a tail cut off a chain, seals included.
func TestKeyedSealsCatchAReseal(t *testing.T) {
	t.Parallel()
	s := keyedSale(t, sealKey1, "resealed", "deleted", "truncated", "intact")
	ctx := context.Background()
	keys := mustSealKeys(t, sealKey1)
	rep, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{Keys: keys})
	if err != nil || !rep.Intact() || rep.CannotVerify() != nil {
		t.Fatalf("honest ledger: %+v %v", rep, err)
	}
	if rep.Keyed != 24 || rep.KeyIDs["k1"] != 24 || rep.Unkeyed != 0 || rep.Checkpoints < 1 || !rep.KeyedLedger || rep.Unprotected() {
		t.Fatalf("honest ledger: %+v, want 24 rows keyed with k1 and a checkpoint", rep)
	}

	var edited int64
	if err := s.Pool.QueryRow(ctx, `SELECT seq FROM ledger_entries WHERE sku = 'resealed' AND type = 'deducted' ORDER BY seq LIMIT 1 OFFSET 2`).
		Scan(&edited); err != nil {
		t.Fatal(err)
	}
	stacktest.Superuser(t, s.Pool, fmt.Sprintf(`UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'resealed' AND seq = %d`, edited))
	stacktest.Reseal(t, s.Pool, "resealed", edited)

	// A row deleted with its seal, the later seals re-linked over the gap.
	stacktest.Superuser(t, s.Pool,
		`DELETE FROM ledger_seals WHERE sku = 'deleted' AND seq = 3`,
		`DELETE FROM ledger_entries WHERE sku = 'deleted' AND seq = 3`)
	stacktest.Reseal(t, s.Pool, "deleted", 4)

	// The last two rows cut off with their seals: the rest of the chain
	// is intact, and only the checkpoint tells it was longer.
	stacktest.Superuser(t, s.Pool,
		`DELETE FROM ledger_seals WHERE sku = 'truncated' AND seq > 4`,
		`DELETE FROM ledger_entries WHERE sku = 'truncated' AND seq > 4`)

	rep, err = ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	wantBroken(t, rep.Broken, map[string]brokenAt{
		"resealed":  {edited, "re-sealed with the public formula"},
		"deleted":   {4, "re-sealed with the public formula"},
		"truncated": {5, "deleted from the tail"},
	})

	// Everything written since a moment deleted, checkpoints included: the
	// database alone looks whole, the checkpoint an auditor recorded
	// outside it (as verify printed it) does not.
	s.SKU(t, "later", 10, 1)
	s.ProjectStreams(t)
	cp, ok, err := s.App.Sealer.Checkpoint(ctx)
	if err != nil || !ok {
		t.Fatalf("checkpoint of later: %v %v", ok, err)
	}
	recorded := domain.CheckpointRef{N: cp.N, MAC: cp.MAC[:16]}
	rep, err = ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{Keys: keys, SKU: "later", Since: &recorded})
	if err != nil || !rep.Intact() {
		t.Fatalf("later, since checkpoint %d: %+v %v", recorded.N, rep, err)
	}
	stacktest.Superuser(t, s.Pool, fmt.Sprintf(
		`DELETE FROM ledger_checkpoint_heads WHERE n >= %d`, recorded.N), fmt.Sprintf(`DELETE FROM ledger_checkpoints WHERE n >= %d`, recorded.N),
		`DELETE FROM ledger_seals WHERE sku = 'later'`, `DELETE FROM ledger_entries WHERE sku = 'later'`)
	rep, err = ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{Keys: keys, SKU: "later"})
	if err != nil || !rep.Intact() {
		t.Fatalf("rolled back, verified without the record: %+v %v, want nothing seen", rep, err)
	}
	rep, err = ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{Keys: keys, SKU: "later", Since: &recorded})
	if err != nil || !strings.Contains(rep.Rollback, fmt.Sprintf("checkpoint %d, recorded earlier, is gone", recorded.N)) {
		t.Fatalf("rolled back, verified since checkpoint %d: %+v %v", recorded.N, rep, err)
	}
}

// TestKeyedSealsRotateAndRefuseToGuess: after a rotation (k2 signs, k1
// only verifies) the chain holds seals of both keys and verifies with
// both; verify given no key cannot check and says so (given only the new
// key, see TestARetiredKeyIsNotCheckedAndHidesNothingElse);
// a sealer without a key refuses the keyed ledger; a forged checkpoint
// and a deleted one are broken.
func TestKeyedSealsRotateAndRefuseToGuess(t *testing.T) {
	t.Parallel()
	s := keyedSale(t, sealKey1, "rot")
	ctx := context.Background()
	rotated := openWithKeys(t, s, sealKey2+","+sealKey1)
	if _, err := s.Projection.AppendBatch(ctx, []domain.Event{{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: "rot",
		Seq: 7, Qty: 1, Delta: -1, Balance: 4, User: "late", RequestID: "late", OccurredAt: time.Now(), StreamID: "0-2"}}); err != nil {
		t.Fatal(err)
	}
	if pass, err := rotated.Sealer.SealAll(ctx); err != nil || pass.Sealed[domain.SealHMACSHA256] != 1 {
		t.Fatalf("sealer with k2: %+v %v, want one keyed seal", pass, err)
	}
	if cp, ok, err := rotated.Sealer.Checkpoint(ctx); err != nil || !ok || cp.KeyID != "k2" || len(cp.Heads) != 1 || cp.Heads[0].Seq != 7 {
		t.Fatalf("checkpoint with k2: %+v %v %v, want rot's head at seq 7", cp, ok, err)
	}
	rep, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{Keys: mustSealKeys(t, sealKey2+","+sealKey1)})
	if err != nil || !rep.Intact() || rep.CannotVerify() != nil || rep.KeyIDs["k1"] != 6 || rep.KeyIDs["k2"] != 1 || rep.Checkpoints != 2 || rep.Newest.KeyID != "k2" {
		t.Fatalf("after a rotation: %+v %v, want 6 rows keyed with k1, 1 with k2, 2 checkpoints", rep, err)
	}

	rep, err = ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.CannotVerify(); !errors.Is(err, ledger.ErrCannotVerify) || !strings.Contains(err.Error(), "no key") || !rep.Intact() || rep.Unprotected() {
		t.Errorf("verify without a key: %v (%+v), want it unable to check", err, rep)
	}
	keyless := openWithKeys(t, s, "")
	if _, err := keyless.Sealer.SealAll(ctx); !errors.Is(err, seal.ErrKeyRequired) {
		t.Fatalf("a sealer without a key on a keyed ledger: %v, want ErrKeyRequired", err)
	}

	verifyCheckpoints := func(want string) {
		t.Helper()
		rep, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{Keys: mustSealKeys(t, sealKey2+","+sealKey1)})
		if err != nil || rep.Intact() || !strings.Contains(rep.BrokenCheckpoint, want) {
			t.Fatalf("verify: %+v %v, want a broken checkpoint saying %q", rep, err, want)
		}
	}
	stacktest.Superuser(t, s.Pool, `UPDATE ledger_checkpoint_heads SET seq = 6 WHERE n = 2`)
	verifyCheckpoints("checkpoint 2's MAC (key k2) does not match")
	stacktest.Superuser(t, s.Pool, `UPDATE ledger_checkpoint_heads SET seq = 7 WHERE n = 2`,
		`DELETE FROM ledger_checkpoint_heads WHERE n = 1`, `DELETE FROM ledger_checkpoints WHERE n = 1`)
	verifyCheckpoints("checkpoints 1-1 were deleted")
}
