package reconcile

import (
	"reflect"
	"testing"

	"github.com/invledger/invledger/domain"
)

func TestClassify(t *testing.T) {
	live := func(stock, seq, buyers int64) LiveSKU {
		return LiveSKU{Present: true, Stock: stock, Seq: seq, Buyers: buyers, Verified: true, Status: "open"}
	}
	ledger := func(stock, seq, count, holders int64) domain.LedgerSummary {
		return domain.LedgerSummary{Stock: stock, Seq: seq, Count: count, Holders: holders,
			Balance: &domain.LedgerBalance{Stock: stock, LastSeq: seq}}
	}
	deducted := func(seq int64) domain.Event {
		return domain.Event{ID: "e", Type: domain.EventDeducted, Seq: seq, Qty: 1, Delta: -1}
	}
	// A hold h reserved at seq 2 and cancelled at seq 3, after the stock at
	// seq 1: Redis has ended it; the ledger holds the cancel and not yet
	// the reserve, which is in flight.
	holdEnded := LiveSKU{Present: true, Stock: 10, Seq: 3, Verified: true, Status: "open", HoldIDsRead: true}
	cancelOnly := domain.LedgerSummary{Stock: 11, Seq: 3, Count: 2, Held: -1, OpenHolds: -1,
		Balance: &domain.LedgerBalance{Stock: 11, Held: -1, LastSeq: 3}}
	reserveInFlight := []domain.Event{{ID: "r", Type: domain.EventReserved, Seq: 2, Qty: 1, Delta: -1, HoldID: "h"}}
	cases := []struct {
		name    string
		c       check
		want    Class
		classes []Class
	}{
		{"in step", check{live: live(7, 4, 3), ledger: ledger(7, 4, 4, 3)}, ClassOK, nil},
		{"never warmed", check{ledger: domain.LedgerSummary{}}, ClassOK, nil},
		{"projection lag explained by the stream", check{live: live(5, 6, 5), ledger: ledger(7, 4, 4, 3),
			inFlight: []domain.Event{deducted(5), deducted(6)}}, ClassLagging, nil},
		{"redis stock raised by hand", check{live: live(9, 4, 3), ledger: ledger(7, 4, 4, 3)}, ClassRedisHigh, []Class{ClassRedisHigh}},
		{"redis stock lowered by hand", check{live: live(6, 4, 3), ledger: ledger(7, 4, 4, 3)}, ClassRedisLow, []Class{ClassRedisLow}},
		{"redis high while lagging", check{live: live(6, 6, 5), ledger: ledger(7, 4, 4, 3),
			inFlight: []domain.Event{deducted(5), deducted(6)}}, ClassRedisHigh, []Class{ClassRedisHigh}},
		{"redis lost writes", check{live: live(9, 2, 1), ledger: ledger(7, 4, 4, 3)}, ClassRedisBehind, []Class{ClassRedisBehind}},
		{"redis lost everything", check{ledger: ledger(7, 4, 4, 3)}, ClassRedisMissing, []Class{ClassRedisMissing}},
		{"seqs missing in ledger and stream", check{live: live(6, 5, 4), ledger: ledger(7, 5, 4, 3)}, ClassLedgerGap, []Class{ClassLedgerGap}},
		{"redis ahead with no stream entries", check{live: live(6, 5, 4), ledger: ledger(7, 4, 4, 3)}, ClassLedgerGap, []Class{ClassLedgerGap}},
		{"balances row edited", check{live: live(7, 4, 3), ledger: domain.LedgerSummary{Stock: 7, Seq: 4, Count: 4, Holders: 3,
			Balance: &domain.LedgerBalance{Stock: 8, LastSeq: 4}}}, ClassBalancesDrift, []Class{ClassBalancesDrift}},
		{"balances row missing", check{live: live(7, 4, 3), ledger: domain.LedgerSummary{Stock: 7, Seq: 4, Count: 4, Holders: 3}},
			ClassBalancesDrift, []Class{ClassBalancesDrift}},
		{"buyers key deleted", check{live: live(7, 4, 0), ledger: ledger(7, 4, 4, 3)}, ClassBuyersDrift, []Class{ClassBuyersDrift}},
		{"buyers archived", check{live: LiveSKU{Present: true, Stock: 7, Seq: 4, Archived: true, Verified: true},
			ledger: ledger(7, 4, 4, 3)}, ClassOK, nil},
		{"buyers not compared while lagging", check{live: live(6, 5, 9), ledger: ledger(7, 4, 4, 3),
			inFlight: []domain.Event{deducted(5)}}, ClassLagging, nil},
		{"a hold's end projected before its reserve", check{live: holdEnded, ledger: cancelOnly, inFlight: reserveInFlight,
			endedInLedger: map[string]bool{"h": true}}, ClassLagging, nil},
		{"a hold reserved in flight, ended in Redis only", check{live: holdEnded, ledger: domain.LedgerSummary{Stock: 11, Seq: 3,
			Count: 2, Balance: &domain.LedgerBalance{Stock: 11, LastSeq: 3}}, inFlight: reserveInFlight},
			ClassHeldDrift, []Class{ClassHeldDrift, ClassOpenHoldsDrift, ClassHoldLedgerOnly}},
		{"two drifts at once", check{live: live(9, 4, 3), ledger: domain.LedgerSummary{Stock: 7, Seq: 4, Count: 4, Holders: 3,
			Balance: &domain.LedgerBalance{Stock: 1, LastSeq: 4}}}, ClassRedisHigh, []Class{ClassRedisHigh, ClassBalancesDrift}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.sku = "s"
			got, findings := classify(tc.c)
			var classes []Class
			for _, f := range findings {
				classes = append(classes, f.Class)
				if f.SKU != "s" || f.Detail == "" {
					t.Fatalf("finding lacks sku or detail: %+v", f)
				}
			}
			if got != tc.want || !reflect.DeepEqual(classes, tc.classes) {
				t.Fatalf("classify = %s %v, want %s %v", got, classes, tc.want, tc.classes)
			}
		})
	}
}

func TestTruthFigures(t *testing.T) {
	c := check{live: LiveSKU{Present: true, Stock: 4, Seq: 7}, ledger: domain.LedgerSummary{Stock: 6, Seq: 5, Count: 5},
		inFlight: []domain.Event{{Seq: 6, Delta: -1}, {Seq: 7, Delta: -1}}}
	f := c.figures()
	if f.TruthStock != 4 || f.TruthSeq != 7 || f.InFlight != 2 || f.InFlightSum != -2 || *f.RedisStock != 4 {
		t.Fatalf("figures %+v", f)
	}
}

func TestSeqRanges(t *testing.T) {
	cases := []struct {
		present []int64
		upTo    int64
		want    []SeqRange
	}{
		{[]int64{1, 2, 3}, 3, nil},
		{[]int64{1, 2, 5}, 6, []SeqRange{{3, 4}, {6, 6}}},
		{nil, 2, []SeqRange{{1, 2}}},
		{[]int64{3, 1}, 3, []SeqRange{{2, 2}}},
	}
	for _, tc := range cases {
		if got := seqRanges(tc.present, tc.upTo); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("seqRanges(%v, %d) = %v, want %v", tc.present, tc.upTo, got, tc.want)
		}
	}
}
