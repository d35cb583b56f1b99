// Package reconcile compares Redis with the ledger, SKU by SKU, reports every
// difference the in-flight events do not explain, records it, alerts, and
// repairs it. It also verifies SKUs after a Redis restart, so that purchases
// resume only on a Redis that agrees with the ledger.
package reconcile

import "time"

// Class names the state of one SKU after a check.
type Class string

const (
	// ClassOK means Redis, the ledger and the balances row agree.
	ClassOK Class = "ok"
	// ClassLagging means Redis is ahead of the ledger by exactly the events
	// still in flight in the stream: the projector has not caught up yet.
	ClassLagging Class = "lagging"
	// ClassRedisLow means Redis shows less stock than the truth: units are
	// being undersold.
	ClassRedisLow Class = "redis_low"
	// ClassRedisHigh means Redis shows more stock than the truth: there is a
	// risk of overselling.
	ClassRedisHigh Class = "redis_high"
	// ClassRedisBehind means Redis's seq is behind the ledger: it lost writes,
	// e.g. in the everysec window or on a lagging replica's promotion.
	ClassRedisBehind Class = "redis_behind"
	// ClassRedisMissing means the ledger knows the SKU but Redis does not.
	ClassRedisMissing Class = "redis_missing"
	// ClassLedgerGap means seqs are missing from both the ledger and the stream.
	ClassLedgerGap Class = "ledger_gap"
	// ClassBalancesDrift means the balances row differs from the ledger fold.
	ClassBalancesDrift Class = "balances_drift"
	// ClassLostAcknowledged means deductions this process acknowledged are
	// in neither Redis nor the ledger: Redis lost them in a crash (everysec
	// mode) before they were projected. They cannot be restored; the buyers
	// hold receipts for units that were never deducted, and nothing is oversold.
	ClassLostAcknowledged Class = "lost_acknowledged"
	// ClassBuyersDrift means Redis's buyers hash disagrees with the ledger's
	// holders, e.g. after a DEL of the buyers key.
	ClassBuyersDrift Class = "buyers_drift"
)

// Figures are the numbers a finding compares.
type Figures struct {
	RedisStock   *int64 `json:"redis_stock"`
	RedisSeq     *int64 `json:"redis_seq"`
	RedisBuyers  *int64 `json:"redis_buyers,omitempty"`
	LedgerStock  int64  `json:"ledger_stock"`
	LedgerSeq    int64  `json:"ledger_seq"`
	LedgerCount  int64  `json:"ledger_count"`
	Holders      int64  `json:"ledger_holders"`
	InFlight     int    `json:"in_flight"`
	InFlightSum  int64  `json:"in_flight_delta"`
	TruthStock   int64  `json:"truth_stock"`
	TruthSeq     int64  `json:"truth_seq"`
	BalanceStock *int64 `json:"balance_stock,omitempty"`
	BalanceSeq   *int64 `json:"balance_seq,omitempty"`
}

// SeqRange is an inclusive range of missing seqs.
type SeqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Finding is one difference found for one SKU.
type Finding struct {
	SKU         string     `json:"sku"`
	Class       Class      `json:"class"`
	Detail      string     `json:"detail"`
	Before      Figures    `json:"before"`
	After       *Figures   `json:"after,omitempty"`
	MissingSeqs []SeqRange `json:"missing_seqs,omitempty"`
	// Lost lists acknowledged deductions found in neither Redis nor the ledger.
	Lost        []LostReceipt `json:"lost,omitempty"`
	Repaired    bool          `json:"repaired"`
	RepairError string        `json:"repair_error,omitempty"`
}

// LostReceipt identifies an acknowledged deduction that was lost.
type LostReceipt struct {
	Seq       int64  `json:"seq"`
	EventID   string `json:"event_id"`
	RequestID string `json:"request_id"`
	User      string `json:"user_id"`
	Qty       int64  `json:"qty"`
}

// Report is the outcome of one reconciliation run.
type Report struct {
	RunID    int64     `json:"run_id"`
	Trigger  string    `json:"trigger"`
	Started  time.Time `json:"started_at"`
	Finished time.Time `json:"finished_at"`
	Checked  int       `json:"checked"`
	// Lagging counts SKUs whose difference the in-flight events explain.
	Lagging  int       `json:"lagging"`
	Drifts   []Finding `json:"drifts"`
	Repaired []Finding `json:"repaired"`
	// Verified counts SKUs stamped as verified under the current Redis run
	// by this run; Unverified those still refusing purchases after it.
	Verified   int `json:"verified"`
	Unverified int `json:"unverified"`
}

// RecordedRun is a stored reconciliation run with its findings.
type RecordedRun struct {
	ID       int64             `json:"id"`
	Trigger  string            `json:"trigger"`
	Started  string            `json:"started_at"`
	Finished string            `json:"finished_at"`
	Checked  int               `json:"checked"`
	Drifts   int               `json:"drifts"`
	Repaired int               `json:"repaired"`
	Error    *string           `json:"error"`
	Findings []RecordedFinding `json:"findings"`
}

// RecordedFinding is one stored finding.
type RecordedFinding struct {
	SKU         string          `json:"sku"`
	Class       Class           `json:"class"`
	Detail      string          `json:"detail"`
	Before      RecordedFigures `json:"before"`
	After       *Figures        `json:"after"`
	Repaired    bool            `json:"repaired"`
	RepairError *string         `json:"repair_error"`
}

// RecordedFigures are a stored finding's figures before repair, with the
// seqs it found missing.
type RecordedFigures struct {
	Figures
	MissingSeqs []SeqRange `json:"missing_seqs,omitempty"`
}
