package seal_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/seal"
)

// memStore is the Store port in memory: the Sealer's logic is pure, and
// the PostgreSQL store's own tests (adapters/internal/postgres/pgstore) hold the
// SQL to the same contract.
type memStore struct {
	mu     sync.Mutex
	rows   map[string][]domain.Event // by seq, with gaps
	seals  map[string][]domain.Seal
	keyed  bool
	cps    []domain.Checkpoint
	marked map[string]int64 // head seq per SKU at the last checkpoint
}

func newMemStore() *memStore {
	return &memStore{rows: map[string][]domain.Event{}, seals: map[string][]domain.Seal{}, marked: map[string]int64{}}
}

// add appends rows in whatever order they arrive, as the projector's
// batches may commit them.
func (m *memStore) add(sku string, seqs ...int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, seq := range seqs {
		m.rows[sku] = append(m.rows[sku], domain.Event{ID: sku + "-" + string(rune('a'+seq)), Type: domain.EventDeducted,
			SKU: sku, Seq: seq, Qty: 1, Delta: -1, Balance: 100 - seq, User: "u", RequestID: "r",
			OccurredAt: time.Date(2026, 12, 2, 16, 0, int(seq), 0, time.UTC)})
	}
	slices.SortFunc(m.rows[sku], func(a, b domain.Event) int { return int(a.Seq - b.Seq) })
}

func (m *memStore) last(sku string) domain.Seal {
	if s := m.seals[sku]; len(s) > 0 {
		return s[len(s)-1]
	}
	return domain.Seal{}
}

func (m *memStore) Behind(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for sku, rows := range m.rows {
		if rows[len(rows)-1].Seq > m.last(sku).Seq {
			out = append(out, sku)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (m *memStore) SealNext(_ context.Context, sku string, limit int, link seal.LinkFunc) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := m.last(sku)
	var after []domain.Event
	for _, e := range m.rows[sku] {
		if e.Seq > last.Seq && len(after) < limit {
			after = append(after, e)
		}
	}
	seals := link(last, after)
	m.seals[sku] = append(m.seals[sku], seals...)
	return len(seals), nil
}

func (m *memStore) Keyed(context.Context) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keyed || len(m.cps) > 0, nil
}

func (m *memStore) Checkpoint(_ context.Context, next seal.CheckpointFunc) (domain.Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var heads []domain.SealHead
	for sku := range m.seals {
		if l := m.last(sku); l.Seq != m.marked[sku] {
			heads = append(heads, domain.SealHead{SKU: sku, Seq: l.Seq, Hash: l.Hash})
		}
	}
	if len(heads) == 0 {
		return domain.Checkpoint{}, false, nil
	}
	slices.SortFunc(heads, func(a, b domain.SealHead) int { return strings.Compare(a.SKU, b.SKU) })
	var prev domain.Checkpoint
	if len(m.cps) > 0 {
		prev = m.cps[len(m.cps)-1]
	}
	cp := next(prev, heads)
	m.cps = append(m.cps, cp)
	for _, h := range heads {
		m.marked[h.SKU] = h.Seq
	}
	return cp, true, nil
}

// verify checks sku's chain as VerifyChains does, row by row in seq order,
// and returns the seq of the first break (0: intact).
func (m *memStore) verify(t *testing.T, sku string, keys domain.SealKeys) int64 {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	v := domain.ChainVerifier{Keys: keys}
	for i, s := range m.seals[sku] {
		if err := v.Check(m.rows[sku][i], s); err != nil {
			if !errors.Is(err, domain.ErrCorruptLedger) {
				t.Fatalf("seq %d: %v", s.Seq, err)
			}
			return s.Seq
		}
	}
	return 0
}

func newSealer(t *testing.T, store seal.Store, keys domain.SealKeys) *seal.Sealer {
	t.Helper()
	s, err := seal.New(seal.Config{Store: store, Batch: 3, Keys: keys, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sealedSeqs(m *memStore, sku string) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int64
	for _, s := range m.seals[sku] {
		out = append(out, s.Seq)
	}
	return out
}

// TestSealsLinkRowsInSeqOrder: rows that arrived out of order are sealed
// in seq order, batch after batch, each link over the previous one; the
// chain verifies, and an edited row breaks it at its seq.
func TestSealsLinkRowsInSeqOrder(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	store.add("a", 5, 1, 7, 2, 3, 6, 4)
	store.add("b", 2, 1)
	pass, err := newSealer(t, store, domain.SealKeys{}).SealAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := sealedSeqs(store, "a"); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("sealed seqs of a: %v, want 1 to 7 in order", got)
	}
	if got := pass.Sealed[domain.SealSHA256]; got != 9 || len(pass.Waiting) != 0 || pass.Checkpoint != nil {
		t.Errorf("pass: %+v, want 9 unkeyed seals, none waiting, no checkpoint", pass)
	}
	prev := ""
	for _, s := range store.seals["a"] {
		if s.PrevHash != prev || s.Algorithm != domain.SealSHA256 || s.KeyID != "" {
			t.Errorf("seal of seq %d: %+v, want an unkeyed link over %q", s.Seq, s, prev)
		}
		prev = s.Hash
	}
	if at := store.verify(t, "a", domain.SealKeys{}); at != 0 {
		t.Fatalf("the chain as sealed breaks at seq %d", at)
	}

	store.rows["a"][3].Qty = 2 // seq 4, edited behind the ledger's back
	if at := store.verify(t, "a", domain.SealKeys{}); at != 4 {
		t.Errorf("an edited seq 4: the chain breaks at %d, want 4", at)
	}
}

// TestAGapStopsTheChainUntilItArrives: a missing seq stops the SKU's chain
// there, pass after pass, and the chain goes on once the row arrives.
func TestAGapStopsTheChainUntilItArrives(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	store.add("a", 1, 2, 4, 5)
	s := newSealer(t, store, domain.SealKeys{})
	for range 2 {
		pass, err := s.SealAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pass.Waiting, []seal.Stop{{SKU: "a", Seq: 3}}) {
			t.Errorf("waiting: %v, want a at seq 3", pass.Waiting)
		}
		if got := sealedSeqs(store, "a"); !slices.Equal(got, []int64{1, 2}) {
			t.Errorf("sealed past the gap: %v", got)
		}
	}
	store.add("a", 3)
	pass, err := s.SealAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pass.Waiting) != 0 || pass.Sealed[domain.SealSHA256] != 3 {
		t.Errorf("after the gap filled: %+v, want 3 sealed and none waiting", pass)
	}
	if got := sealedSeqs(store, "a"); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("sealed seqs: %v, want 1 to 5", got)
	}
	if at := store.verify(t, "a", domain.SealKeys{}); at != 0 {
		t.Errorf("the chain breaks at seq %d", at)
	}
}

// TestKeyedSealsAndCheckpoints: with a key the links are keyed and name it,
// the first pass checkpoints the heads, a keyed chain does not verify
// without the key and an edited row is named under it; a checkpoint with
// no head moved writes nothing.
func TestKeyedSealsAndCheckpoints(t *testing.T) {
	ctx := context.Background()
	key, err := domain.NewSealKey("k1", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := domain.NewSealKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	store := newMemStore()
	store.add("a", 1, 2)
	s := newSealer(t, store, keys)
	if _, err := s.SealAll(ctx); err != nil { // first pass: the checkpoint comes before the links
		t.Fatal(err)
	}
	store.add("a", 3)
	store.add("b", 1)
	pass, err := s.SealAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pass.Sealed[domain.SealHMACSHA256] != 2 || pass.Sealed[domain.SealSHA256] != 0 {
		t.Errorf("sealed %v, want 2 keyed", pass.Sealed)
	}
	for _, sl := range store.seals["a"] {
		if sl.Algorithm != domain.SealHMACSHA256 || sl.KeyID != "k1" {
			t.Errorf("seal of seq %d: %+v, want hmac-sha256 under k1", sl.Seq, sl)
		}
	}
	if at := store.verify(t, "a", keys); at != 0 {
		t.Errorf("the keyed chain breaks at seq %d", at)
	}
	cp, written, err := s.Checkpoint(ctx)
	if err != nil || !written {
		t.Fatalf("checkpoint after new seals: written %v, %v", written, err)
	}
	if cp.KeyID != "k1" || !slices.Equal(cp.Heads, []domain.SealHead{
		{SKU: "a", Seq: 3, Hash: store.seals["a"][2].Hash}, {SKU: "b", Seq: 1, Hash: store.seals["b"][0].Hash}}) {
		t.Errorf("checkpoint %+v, want k1 over a@3 and b@1", cp)
	}
	v := domain.CheckpointVerifier{Keys: keys}
	if err := v.Check(cp); err != nil {
		t.Errorf("the checkpoint does not verify: %v", err)
	}
	if _, written, err := s.Checkpoint(ctx); err != nil || written {
		t.Errorf("a checkpoint with no head moved: written %v, %v", written, err)
	}

	store.rows["a"][1].User = "mallory"
	if at := store.verify(t, "a", keys); at != 2 {
		t.Errorf("an edited seq 2 under a key: the chain breaks at %d, want 2", at)
	}
}

// TestNoKeyOnAKeyedLedgerSealsNothing: without a key, a ledger that holds
// a keyed checkpoint gets no unkeyed link that anyone could forge.
func TestNoKeyOnAKeyedLedgerSealsNothing(t *testing.T) {
	store := newMemStore()
	store.keyed = true
	store.add("a", 1)
	if _, err := newSealer(t, store, domain.SealKeys{}).SealAll(context.Background()); !errors.Is(err, seal.ErrKeyRequired) {
		t.Errorf("SealAll without a key on a keyed ledger: %v, want ErrKeyRequired", err)
	}
	if got := sealedSeqs(store, "a"); len(got) != 0 {
		t.Errorf("sealed %v", got)
	}
}

// TestConfigNamesEveryBadSetting: Validate reports every bad setting at
// once, and New refuses them.
func TestConfigNamesEveryBadSetting(t *testing.T) {
	err := seal.Config{Interval: -1, Batch: -1, GapWarnAfter: -1, CheckpointInterval: -1}.Validate()
	for _, field := range []string{"Store", "Interval", "Batch", "GapWarnAfter", "CheckpointInterval"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate: %v, want it to name %s", err, field)
		}
	}
	if _, err := seal.New(seal.Config{}); err == nil {
		t.Error("New without a Store succeeded")
	}
}
