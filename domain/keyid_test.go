package domain_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
)

func mustKeys(t testing.TB, s string, retired ...string) domain.SealKeys {
	t.Helper()
	k, err := domain.ParseSealKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	if k, err = k.WithRetired(retired...); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAKeyIDIsNotAReasonToStopChecking: the key id of a seal is a column
// whoever tampers can write. A seal whose id was edited but that a given
// key made is broken; one under an id neither given nor retired is broken
// (ErrUnknownSealKey); one under a retired id is not checked and the chain
// goes on from it, so an edit after it is still found; with no key at all
// nothing can be checked.
func TestAKeyIDIsNotAReasonToStopChecking(t *testing.T) {
	t.Parallel()
	const k1 = "k1:0123456789abcdef0123456789abcdef"
	signing := mustKeys(t, k1)
	events := make([]domain.Event, 4)
	seals := make([]domain.Seal, 4)
	prev := ""
	for i := range events {
		events[i] = domain.Event{ID: "e", Type: domain.EventDeducted, SKU: "s", Seq: int64(i + 1), Qty: 1, Delta: -1, Balance: int64(9 - i), User: "u"}
		seals[i] = domain.NextSeal(signing, prev, events[i])
		prev = seals[i].Hash
	}
	// check verifies the chain with seal 2 (seq 2) under key id "k0",
	// its row edited when editRow, and row 3 (seq 4) edited when
	// editLater; it returns each row's error.
	check := func(keys domain.SealKeys, editRow, editLater bool) []error {
		v := domain.ChainVerifier{Keys: keys}
		errs := make([]error, len(events))
		for i := range events {
			e, s := events[i], seals[i]
			if i == 1 {
				s.KeyID = "k0"
				if editRow {
					e.User = "mallory"
				}
			}
			if i == 3 && editLater {
				e.User = "mallory"
			}
			errs[i] = v.Check(e, s)
		}
		return errs
	}

	if errs := check(signing, false, false); !errors.Is(errs[1], domain.ErrCorruptLedger) || !strings.Contains(errs[1].Error(), "key k1 made it: its key id was edited") {
		t.Errorf("key id edited on an intact row: %v, want broken, naming k1", errs[1])
	}
	errs := check(signing, true, false)
	if !errors.Is(errs[1], domain.ErrCorruptLedger) || !errors.Is(errs[1], domain.ErrUnknownSealKey) || !strings.Contains(errs[1].Error(), `sku s seq 2`) {
		t.Errorf("edited row under an unknown key id: %v, want broken at seq 2 with ErrUnknownSealKey", errs[1])
	}
	errs = check(mustKeys(t, k1, "k0"), true, true)
	if !errors.Is(errs[1], domain.ErrSealKeyRetired) || errors.Is(errs[1], domain.ErrCorruptLedger) || errs[2] != nil {
		t.Errorf("under a retired key id: %v then %v, want ErrSealKeyRetired and the next row checked", errs[1], errs[2])
	}
	if !errors.Is(errs[3], domain.ErrCorruptLedger) {
		t.Errorf("an edit after a retired seal: %v, want it found", errs[3])
	}
	errs = check(domain.SealKeys{}, false, false)
	if !errors.Is(errs[0], domain.ErrSealKeyMissing) {
		t.Errorf("no key at all: %v, want ErrSealKeyMissing", errs[0])
	}
}

// TestCheckpointsAfterOneThatFailsAreChecked: a checkpoint under a
// retired id, under an unknown one, or whose id was edited, does not stop
// the checks of those after it; the heads of every checkpoint a given key
// made count, an edited id's included, and no others.
func TestCheckpointsAfterOneThatFailsAreChecked(t *testing.T) {
	t.Parallel()
	keys := mustKeys(t, "k1:0123456789abcdef0123456789abcdef")
	k1, _ := keys.Signing()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var cps []domain.Checkpoint
	prev := domain.Checkpoint{}
	for i := range 3 {
		prev = domain.NewCheckpoint(k1, prev, at, []domain.SealHead{{SKU: "a", Seq: int64(i + 1), Hash: "h"}, {SKU: "b" + string(rune('0'+i)), Seq: 1, Hash: "h"}})
		cps = append(cps, prev)
	}
	run := func(keys domain.SealKeys, idOfSecond string) ([]error, map[string]int64) {
		v := domain.CheckpointVerifier{Keys: keys}
		var errs []error
		for i, c := range cps {
			if i == 1 {
				c.KeyID = idOfSecond
			}
			errs = append(errs, v.Check(c))
		}
		heads := map[string]int64{}
		for _, h := range v.Heads() {
			heads[h.SKU] = h.Checkpoint
		}
		return errs, heads
	}
	errs, heads := run(keys, "k0")
	if errs[0] != nil || !errors.Is(errs[1], domain.ErrCorruptLedger) || !strings.Contains(errs[1].Error(), "key k1 made it") || errs[2] != nil {
		t.Errorf("edited key id: %v, want checkpoint 2 broken and 1, 3 verified", errs)
	}
	if heads["b1"] != 2 || heads["a"] != 3 {
		t.Errorf("edited key id: heads %v, want checkpoint 2's heads (k1 made it) and a's from 3", heads)
	}
	cps[1].MAC = strings.Repeat("0", 64) // forged: no key made it
	cps[2] = domain.NewCheckpoint(k1, cps[1], at, cps[2].Heads)
	errs, heads = run(keys, "k0")
	if !errors.Is(errs[1], domain.ErrUnknownSealKey) || errs[2] != nil {
		t.Errorf("forged under an unknown id: %v, want ErrUnknownSealKey and checkpoint 3 verified", errs)
	}
	if _, ok := heads["b1"]; ok || heads["a"] != 3 {
		t.Errorf("forged under an unknown id: heads %v, want none from checkpoint 2", heads)
	}
	errs, _ = run(mustKeys(t, "k1:0123456789abcdef0123456789abcdef", "k0"), "k0")
	if !errors.Is(errs[1], domain.ErrSealKeyRetired) || errors.Is(errs[1], domain.ErrCorruptLedger) || errs[2] != nil {
		t.Errorf("under a retired id: %v, want ErrSealKeyRetired and checkpoint 3 verified", errs)
	}
}

// TestARetiredKeyPastedWithItsSecretIsNotQuoted: a key pasted into the
// retired ids by mistake is refused without showing its secret.
func TestARetiredKeyPastedWithItsSecretIsNotQuoted(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef0123456789abcdef"
	_, err := mustKeys(t, "k1:"+secret).WithRetired("k0", "k2:"+secret)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "entry 2") {
		t.Errorf("WithRetired of an id:secret: %v, want entry 2 refused without its secret", err)
	}
}

// FuzzWithRetired checks the retired key ids' validation against its
// rule: every id 1-32 of A-Z a-z 0-9 . _ -, none a configured key's;
// repeats count once, and a refusal names the setting's subject.
func FuzzWithRetired(f *testing.F) {
	for _, s := range []string{"k0", "k0,k0", "k1", "k0,bad id", "", "é", "k0,,k2", strings.Repeat("k", 33)} {
		f.Add(s)
	}
	rule := regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)
	keys := mustKeys(f, "k1:0123456789abcdef0123456789abcdef")
	f.Fuzz(func(t *testing.T, s string) {
		ids := strings.Split(s, ",")
		valid := true
		var want []string
		for _, id := range ids {
			valid = valid && rule.MatchString(id) && id != "k1"
			if !slices.Contains(want, id) {
				want = append(want, id)
			}
		}
		got, err := keys.WithRetired(ids...)
		if valid != (err == nil) {
			t.Fatalf("WithRetired(%q) err = %v, want valid = %v", ids, err, valid)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "retired") {
				t.Fatalf("WithRetired(%q) err = %v does not say what is refused", ids, err)
			}
			return
		}
		if !slices.Equal(got.RetiredIDs(), want) || got.Retired("k1") || !slices.Equal(got.IDs(), keys.IDs()) {
			t.Fatalf("WithRetired(%q) = retired %v keys %v, want retired %v and the keys kept", ids, got.RetiredIDs(), got.IDs(), want)
		}
	})
}
