package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/invledger/invledger/domain"
)

// check is everything known about one SKU at one instant.
type check struct {
	sku      string
	id       domain.SKUID
	live     LiveSKU
	ledger   domain.LedgerSummary
	inFlight []domain.Event // stream events not yet in the ledger, by seq
	// endedInLedger are holds reserved in flight whose end the ledger
	// holds already (LedgerFold.EndedHolds).
	endedInLedger map[string]bool
}

// figures derives the truth from the ledger plus the in-flight events.
func (c check) figures() Figures {
	f := Figures{LedgerStock: c.ledger.Stock, LedgerSeq: c.ledger.Seq, LedgerCount: c.ledger.Count,
		Holders: c.ledger.Holders, LedgerDeductions: c.ledger.Deductions, InFlight: len(c.inFlight),
		TruthStock: c.ledger.Stock, TruthSeq: c.ledger.Seq, TruthHeld: c.ledger.Held, TruthOpenHolds: c.ledger.OpenHolds}
	for _, e := range c.inFlight {
		f.InFlightSum += e.Delta
		f.TruthSeq = max(f.TruthSeq, e.Seq)
		switch e.Type {
		case domain.EventReserved:
			f.TruthHeld += e.Qty
			f.TruthOpenHolds++
		case domain.EventConfirmed, domain.EventCancelled, domain.EventExpired:
			f.TruthHeld -= e.Qty
			f.TruthOpenHolds--
		}
	}
	f.TruthStock += f.InFlightSum
	if c.live.Present && c.live.Corrupt == nil {
		stock, seq, buyers, receipts := c.live.Stock, c.live.Seq, c.live.Buyers, c.live.Receipts
		f.RedisStock, f.RedisSeq, f.RedisBuyers, f.RedisReceipts = &stock, &seq, &buyers, &receipts
		held, open := c.live.Held, c.live.OpenHolds
		f.RedisHeld, f.RedisOpenHolds = &held, &open
	}
	if b := c.ledger.Balance; b != nil {
		stock, seq := b.Stock, b.LastSeq
		f.BalanceStock, f.BalanceSeq = &stock, &seq
	}
	return f
}

// classify compares one SKU's Redis state with the ledger and the events in
// flight. It reports lagging, never drift, for any difference the in-flight
// events explain exactly: a sale at full speed is not an incident. A SKU
// whose in-flight events were too many to read (TailTruncated) is lagging
// unless Redis is behind the ledger: its stock is not compared, only what
// needs no in-flight events (its seq against the ledger's, receipts,
// balances).
func classify(c check) (Class, []Finding) {
	f := c.figures()
	known := c.ledger.Count + int64(len(c.inFlight))
	if !c.live.Present {
		if known == 0 || c.live.Retired {
			// Defined but never warmed, or retired after its sale: nothing to compare.
			return ClassOK, nil
		}
		return ClassRedisMissing, []Finding{{SKU: c.sku, Class: ClassRedisMissing, Before: f,
			Detail: fmt.Sprintf("the ledger holds %d events up to seq %d but Redis has no state for the SKU", known, f.TruthSeq)}}
	}

	var findings []Finding
	add := func(class Class, format string, args ...any) {
		findings = append(findings, Finding{SKU: c.sku, Class: class, Before: f, Detail: fmt.Sprintf(format, args...)})
	}
	redisSide := ClassOK
	switch {
	// Behind first: a Redis that lost writes must never go on issuing seqs the
	// ledger already holds, gap or no gap. That needs no in-flight events, so
	// it is checked even when the tail was too long to read.
	case c.live.Seq < f.TruthSeq:
		redisSide = ClassRedisBehind
		add(ClassRedisBehind, "Redis is at seq %d, the ledger and stream at %d: Redis lost %d events", c.live.Seq, f.TruthSeq, f.TruthSeq-c.live.Seq)
	case c.live.TailTruncated:
		// Too far behind to compare stock exactly: lagging.
	case known < f.TruthSeq || c.live.Seq > f.TruthSeq:
		redisSide = ClassLedgerGap
		add(ClassLedgerGap, "seqs up to %d: %d known to the ledger and the stream, Redis is at seq %d", max(f.TruthSeq, c.live.Seq), known, c.live.Seq)
	case c.live.Stock > f.TruthStock:
		redisSide = ClassRedisHigh
		add(ClassRedisHigh, "Redis stock %d is %d above the truth %d (ledger %d%+d in flight): risk of overselling",
			c.live.Stock, c.live.Stock-f.TruthStock, f.TruthStock, f.LedgerStock, f.InFlightSum)
	case c.live.Stock < f.TruthStock:
		redisSide = ClassRedisLow
		add(ClassRedisLow, "Redis stock %d is %d below the truth %d (ledger %d%+d in flight): units are being undersold",
			c.live.Stock, f.TruthStock-c.live.Stock, f.TruthStock, f.LedgerStock, f.InFlightSum)
	}

	// Redis writes a receipt with every deduction and never drops one, and
	// the ledger only holds what Redis wrote: fewer receipts than the
	// ledger's deductions means Redis lost some, in flight or not.
	if redisSide == ClassOK && !c.live.Archived && c.live.Receipts < c.ledger.Deductions {
		add(ClassReceiptsMissing, "Redis holds %d receipts, the ledger has %d deductions: a retry of a lost receipt would buy again",
			c.live.Receipts, c.ledger.Deductions)
	}

	// Held units and open holds move with the same events as stock, so the
	// in-flight events explain them exactly whenever they explain the stock.
	if redisSide == ClassOK && !c.live.TailTruncated {
		if c.live.Held != f.TruthHeld {
			add(ClassHeldDrift, "Redis holds %d units for open holds, the ledger and stream %d (ledger %d%+d in flight)",
				c.live.Held, f.TruthHeld, c.ledger.Held, f.TruthHeld-c.ledger.Held)
		}
		if c.live.OpenHolds != f.TruthOpenHolds {
			add(ClassOpenHoldsDrift, "Redis counts %d open holds, the ledger and stream %d (ledger %d%+d in flight)",
				c.live.OpenHolds, f.TruthOpenHolds, c.ledger.OpenHolds, f.TruthOpenHolds-c.ledger.OpenHolds)
		}
		if c.live.HoldIDsRead {
			redisOnly, ledgerOnly := c.openHoldsDiffer()
			if len(redisOnly) > 0 {
				add(ClassHoldRedisOnly, "%d holds are open in Redis but ended or unknown in the ledger and stream: %s",
					len(redisOnly), nameHolds(redisOnly))
			}
			if len(ledgerOnly) > 0 {
				add(ClassHoldLedgerOnly, "%d holds are open in the ledger and stream but ended or missing in Redis's expiry set: %s",
					len(ledgerOnly), nameHolds(ledgerOnly))
			}
		}
	}

	b := c.ledger.Balance
	if c.ledger.Count > 0 && (b == nil || b.Stock != c.ledger.Stock || b.Held != c.ledger.Held || b.LastSeq != c.ledger.Seq) {
		if b == nil {
			add(ClassBalancesDrift, "no balances row, the ledger folds to stock %d at seq %d", c.ledger.Stock, c.ledger.Seq)
		} else {
			add(ClassBalancesDrift, "balances row says stock %d held %d at seq %d, the ledger folds to stock %d held %d at seq %d",
				b.Stock, b.Held, b.LastSeq, c.ledger.Stock, c.ledger.Held, c.ledger.Seq)
		}
	}
	// Buyers are compared only when nothing is in flight: the ledger's
	// holders are exact then, and a sale in progress cannot look like drift.
	if len(c.inFlight) == 0 && !c.live.TailTruncated && redisSide == ClassOK && !c.live.Archived && c.live.Buyers != c.ledger.Holders {
		add(ClassBuyersDrift, "Redis has %d buyers, the ledger has %d holders", c.live.Buyers, c.ledger.Holders)
	}
	switch {
	case len(findings) > 0:
		return findings[0].Class, findings
	case len(c.inFlight) > 0 || c.live.TailTruncated:
		return ClassLagging, nil
	}
	return ClassOK, nil
}

// openHoldsDiffer compares the ids of Redis's open holds with the ledger's
// open holds plus the hold events in flight, which the snapshot read at
// the same instant as Redis's: it returns the ids open on one side only,
// sorted. A hold reserved in flight is not open when the ledger holds its
// end already.
func (c check) openHoldsDiffer() (redisOnly, ledgerOnly []string) {
	truth := make(map[string]bool, len(c.ledger.OpenHoldIDs))
	for _, id := range c.ledger.OpenHoldIDs {
		truth[id] = true
	}
	for _, e := range c.inFlight {
		switch e.Type {
		case domain.EventReserved:
			if !c.endedInLedger[e.HoldID] {
				truth[e.HoldID] = true
			}
		case domain.EventConfirmed, domain.EventCancelled, domain.EventExpired:
			delete(truth, e.HoldID)
		}
	}
	for _, id := range c.live.OpenHoldIDs {
		if truth[id] {
			delete(truth, id)
		} else {
			redisOnly = append(redisOnly, id)
		}
	}
	for id := range truth {
		ledgerOnly = append(ledgerOnly, id)
	}
	slices.Sort(redisOnly)
	slices.Sort(ledgerOnly)
	return redisOnly, ledgerOnly
}

// maxNamedHolds bounds the hold ids one finding names.
const maxNamedHolds = 20

// nameHolds lists ids, at most maxNamedHolds of them.
func nameHolds(ids []string) string {
	if len(ids) <= maxNamedHolds {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:maxNamedHolds], ", "), len(ids)-maxNamedHolds)
}

// seqRanges turns the seqs in 1..upTo that are absent from present into
// inclusive ranges.
func seqRanges(present []int64, upTo int64) []SeqRange {
	slices.Sort(present)
	var out []SeqRange
	next := int64(1)
	for _, s := range append(present, upTo+1) {
		if s > next {
			out = append(out, SeqRange{From: next, To: min(s-1, upTo)})
		}
		next = max(next, s+1)
	}
	return out
}
