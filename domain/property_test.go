package domain_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/invledger/invledger/domain"
)

// simInventory is an independent model of one SKU: it decides which
// operations are legal and remembers what every user holds.
type simInventory struct {
	rng      *rand.Rand
	l        *ledger
	holdings map[string]int64
	open     []string // request ids deducted and not yet released
	reqs     map[string]domain.Purchase
	sumDelta int64
	nextReq  int
}

var simUsers = []string{"alice", "bob", "carol", "dave", "эрик", "user with space"}

func newSim(seed int64, initial int64) *simInventory {
	s := &simInventory{
		rng:      rand.New(rand.NewSource(seed)),
		l:        newLedger(),
		holdings: map[string]int64{},
		reqs:     map[string]domain.Purchase{},
	}
	s.l.stocked(initial)
	s.sumDelta = initial
	return s
}

func (s *simInventory) step() {
	switch op := s.rng.Intn(10); {
	case op < 5 && s.l.stock > 0: // deduct
		user := simUsers[s.rng.Intn(len(simUsers))]
		qty := 1 + s.rng.Int63n(min(s.l.stock, 5))
		s.nextReq++
		req := fmt.Sprintf("req-%d", s.nextReq)
		s.l.deduct(user, req, qty)
		s.holdings[user] += qty
		s.open = append(s.open, req)
		s.reqs[req] = purchase(user, qty, s.l.seq, s.l.stock)
		s.sumDelta -= qty
	case op < 8 && len(s.open) > 0: // release a random open purchase
		i := s.rng.Intn(len(s.open))
		req := s.open[i]
		s.open = append(s.open[:i], s.open[i+1:]...)
		p := s.reqs[req]
		s.l.release(p.User, req, p.Qty)
		s.reqs[req] = released(p, s.l.seq)
		if s.holdings[p.User] -= p.Qty; s.holdings[p.User] == 0 {
			delete(s.holdings, p.User)
		}
		s.sumDelta += p.Qty
	default: // adjust, never below zero
		delta := s.rng.Int63n(s.l.stock+11) - s.l.stock // in [-stock, +10]
		s.l.adjust(delta)
		s.sumDelta += delta
	}
}

func TestFoldRandomValidSequences(t *testing.T) {
	const runs = 200
	master := rand.New(rand.NewSource(20250101))
	for run := 0; run < runs; run++ {
		seed := master.Int63()
		sim := newSim(seed, master.Int63n(20))
		steps := 1 + master.Intn(300)
		for i := 0; i < steps; i++ {
			sim.step()
		}
		events := sim.l.events

		got, err := domain.Fold(testSKU, events)
		if err != nil {
			t.Fatalf("seed %d: Fold rejected a valid sequence: %v", seed, err)
		}
		if got.Stock != sim.sumDelta {
			t.Errorf("seed %d: Stock = %d, want sum of deltas %d", seed, got.Stock, sim.sumDelta)
		}
		if got.Stock != events[len(events)-1].Balance {
			t.Errorf("seed %d: Stock = %d, last balance %d", seed, got.Stock, events[len(events)-1].Balance)
		}
		if got.Seq != int64(len(events)) {
			t.Errorf("seed %d: Seq = %d, want %d", seed, got.Seq, len(events))
		}
		if !reflect.DeepEqual(got.Buyers, sim.holdings) {
			t.Errorf("seed %d: Buyers = %v, want %v", seed, got.Buyers, sim.holdings)
		}
		if !reflect.DeepEqual(got.Requests, sim.reqs) {
			t.Errorf("seed %d: Requests differ from simulation\n got: %v\nwant: %v", seed, got.Requests, sim.reqs)
		}
		if got.Stock < 0 {
			t.Errorf("seed %d: negative stock %d", seed, got.Stock)
		}

		// Every prefix of a valid ledger is itself valid.
		cut := master.Intn(len(events)) + 1
		if _, err := domain.Fold(testSKU, events[:cut]); err != nil {
			t.Errorf("seed %d: prefix of length %d rejected: %v", seed, cut, err)
		}
	}
}
