package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// moreCheckpoints sells n more units of sku, one a checkpoint, and returns
// those checkpoints.
func moreCheckpoints(t *testing.T, s *stacktest.Stack, sku string, n int) []domain.Checkpoint {
	t.Helper()
	ctx := context.Background()
	var cps []domain.Checkpoint
	for i := range n {
		u := fmt.Sprint("later-", i)
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, u, 1, u)); err != nil {
			t.Fatal(err)
		}
		s.ProjectStreams(t)
		cp, ok, err := s.App.Sealer.Checkpoint(ctx)
		if err != nil || !ok {
			t.Fatalf("checkpoint: %v %v", ok, err)
		}
		cps = append(cps, cp)
	}
	return cps
}

func verifyChains(t *testing.T, s *stacktest.Stack, opt ledger.VerifyOptions) ledger.ChainReport {
	t.Helper()
	rep, err := ledger.VerifyChains(context.Background(), s.Seals, opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestVerifyCannotBeTalkedOutOfAFinding reproduces the red team's attacks
// of issue 41 on a keyed ledger, each of which hid a tamper behind a key
// id verify was not given (exit 1, "NOT CHECKED", before): an edited buyer
// whose seal names key id k0; a tail cut whose only checkpoint names k0;
// a rollback past the recorded checkpoint 4 with checkpoint 3 under k0.
// A key id neither given nor declared retired is broken, and what can
// still be checked is.
func TestVerifyCannotBeTalkedOutOfAFinding(t *testing.T) {
	t.Parallel()
	s := keyedSale(t, sealKey1, "a3", "cut", "rolled")
	cps := moreCheckpoints(t, s, "rolled", 4) // checkpoints 2-5
	keys := mustSealKeys(t, sealKey1)
	rep := verifyChains(t, s, ledger.VerifyOptions{Keys: keys})
	if ref, ok := rep.Reference(); !rep.Intact() || !ok || ref.N != 5 || rep.Latest != 5 {
		t.Fatalf("honest ledger: %+v, want intact with checkpoint 5 to keep", rep)
	}

	stacktest.Superuser(t, s.Pool,
		`UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'a3' AND seq = 4`,
		`UPDATE ledger_seals SET key_id = 'k0' WHERE sku = 'a3' AND seq = 4`)
	stacktest.Superuser(t, s.Pool,
		`DELETE FROM ledger_seals WHERE sku = 'cut' AND seq > 4`,
		`DELETE FROM ledger_entries WHERE sku = 'cut' AND seq > 4`,
		`UPDATE ledger_checkpoints SET key_id = 'k0' WHERE n = 1`)
	rep = verifyChains(t, s, ledger.VerifyOptions{Keys: keys})
	wantBroken(t, rep.Broken, map[string]brokenAt{
		"a3":  {4, `key id "k0", which is neither a given seal key nor declared retired`},
		"cut": {5, "checkpoint 1 vouches for it up to seq 6: rows 5-6, or their seals, were deleted from the tail"},
	})
	if !strings.Contains(rep.BrokenCheckpoint, `checkpoint 1 names key id "k0" but key k1 made it`) || rep.Checkpoints != 4 ||
		!slices.Equal(rep.UnknownKeyIDs, []string{"k0"}) || rep.CannotVerify() != nil {
		t.Errorf("key ids edited: %+v, want checkpoint 1 broken, 2-5 verified, k0 unknown, nothing unchecked", rep)
	}
	if _, ok := rep.Reference(); ok {
		t.Errorf("a broken ledger offers a checkpoint to keep: %+v", rep)
	}

	recorded := domain.CheckpointRef{N: cps[2].N, MAC: cps[2].MAC[:16]} // checkpoint 4
	stacktest.Superuser(t, s.Pool,
		`DELETE FROM ledger_checkpoint_heads WHERE n >= 4`, `DELETE FROM ledger_checkpoints WHERE n >= 4`,
		`DELETE FROM ledger_seals WHERE sku = 'rolled' AND seq > 8`, `DELETE FROM ledger_entries WHERE sku = 'rolled' AND seq > 8`,
		`UPDATE ledger_checkpoints SET key_id = 'k0' WHERE n = 3`)
	rep = verifyChains(t, s, ledger.VerifyOptions{Keys: keys, SKU: "rolled", Since: &recorded})
	if !strings.Contains(rep.Rollback, "checkpoint 4, recorded earlier, is gone (the newest is 3)") {
		t.Errorf("rolled back past the recorded checkpoint 4: %+v, want the rollback named", rep)
	}
	if _, ok := rep.Reference(); ok {
		t.Errorf("rolled back: a checkpoint to keep is offered: %+v", rep)
	}
}

// TestARetiredKeyIsNotCheckedAndHidesNothingElse: after a rotation from k1
// to k2, verify given only k2 calls k1's seals and checkpoint broken (k1
// might be an id someone wrote) and says why; with k1 declared retired, it
// passes, counts k1's rows and checkpoint as not checked, offers k2's
// checkpoint to keep, and still finds an edit of a row sealed with k2, a
// tail cut that k2's checkpoint vouches for, and a rollback past it.
func TestARetiredKeyIsNotCheckedAndHidesNothingElse(t *testing.T) {
	t.Parallel()
	s := keyedSale(t, sealKey1, "old", "edited", "cut") // seqs 1-6 sealed with k1, checkpoint 1
	ctx := context.Background()
	rotated := openWithKeys(t, s, sealKey2+","+sealKey1)
	var later []domain.Event
	for _, sku := range []string{"edited", "cut"} {
		for seq := int64(7); seq <= 8; seq++ {
			u := fmt.Sprint("late-", seq)
			later = append(later, domain.Event{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: sku, Seq: seq, Qty: 1, Delta: -1,
				Balance: 11 - seq, User: u, RequestID: u, OccurredAt: time.Now(), StreamID: fmt.Sprint("0-", seq)})
		}
	}
	if _, err := s.Projection.AppendBatch(ctx, later); err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Sealer.SealAll(ctx); err != nil {
		t.Fatal(err)
	}
	cp, ok, err := rotated.Sealer.Checkpoint(ctx)
	if err != nil || !ok || cp.KeyID != "k2" {
		t.Fatalf("checkpoint with k2: %+v %v %v", cp, ok, err)
	}
	onlyK2 := mustSealKeys(t, sealKey2)
	retired, err := onlyK2.WithRetired("k1")
	if err != nil {
		t.Fatal(err)
	}

	rep := verifyChains(t, s, ledger.VerifyOptions{Keys: onlyK2})
	wantBroken(t, rep.Broken, map[string]brokenAt{
		"old": {1, `key id "k1", which is neither`}, "edited": {1, `key id "k1", which is neither`}, "cut": {1, `key id "k1", which is neither`},
	})
	if !strings.Contains(rep.BrokenCheckpoint, `checkpoint 1 is keyed with key id "k1", which is neither`) || !slices.Equal(rep.UnknownKeyIDs, []string{"k1"}) {
		t.Errorf("k1 neither given nor retired: %+v, want checkpoint 1 broken and k1 unknown", rep)
	}

	rep = verifyChains(t, s, ledger.VerifyOptions{Keys: retired})
	ref, ok := rep.Reference()
	if !rep.Intact() || rep.CannotVerify() != nil || rep.Retired["k1"] != 18 || rep.RetiredCheckpoints != 1 ||
		rep.KeyIDs["k2"] != 4 || rep.Checkpoints != 1 || !ok || ref.N != 2 {
		t.Fatalf("k1 retired: %+v, want intact, 18 rows and 1 checkpoint not checked, 4 rows and checkpoint 2 verified and kept", rep)
	}

	stacktest.Superuser(t, s.Pool,
		`UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'edited' AND seq = 8`,
		`DELETE FROM ledger_seals WHERE sku = 'cut' AND seq = 8`, `DELETE FROM ledger_entries WHERE sku = 'cut' AND seq = 8`)
	rep = verifyChains(t, s, ledger.VerifyOptions{Keys: retired})
	wantBroken(t, rep.Broken, map[string]brokenAt{
		"edited": {8, "does not match the row's fields"},
		"cut":    {8, "checkpoint 2 vouches for it up to seq 8"},
	})

	recorded := domain.CheckpointRef{N: ref.N, MAC: ref.MAC}
	stacktest.Superuser(t, s.Pool, `DELETE FROM ledger_checkpoint_heads WHERE n = 2`, `DELETE FROM ledger_checkpoints WHERE n = 2`)
	rep = verifyChains(t, s, ledger.VerifyOptions{Keys: retired, SKU: "old", Since: &recorded})
	if !strings.Contains(rep.Rollback, "checkpoint 2, recorded earlier, is gone") {
		t.Errorf("checkpoint 2 deleted, recorded outside: %+v, want the rollback named", rep)
	}
}
