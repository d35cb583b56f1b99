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
	// ClassBuyersDrift means Redis's count of buyers disagrees with the
	// ledger's holders, e.g. after Redis lost a SKU's buyers.
	ClassBuyersDrift Class = "buyers_drift"
	// ClassReceiptsMissing means Redis holds fewer receipts of a SKU than
	// the ledger has deductions, e.g. after Redis evicted or lost them: a retry of a lost receipt would buy again, and its release would
	// answer not found.
	ClassReceiptsMissing Class = "receipts_missing"
	// ClassHeldDrift means the units Redis counts as held differ from the
	// ledger's open holds plus the hold events in flight: stock stands
	// reserved that no buyer holds, or the other way round. It is reported,
	// not repaired.
	ClassHeldDrift Class = "held_drift"
	// ClassOpenHoldsDrift means Redis counts another number of open holds
	// than the ledger plus the hold events in flight: a hold began or ended
	// on one side only. It is reported, not repaired.
	ClassOpenHoldsDrift Class = "open_holds_drift"
	// ClassHoldRedisOnly means holds are open in Redis (in its expiry set)
	// that the ledger plus the hold events in flight has ended, or never
	// reserved. The finding names them. It is reported, not repaired: the
	// ledger cannot tell a Redis that kept a hold it should have ended from
	// a ledger that lost the hold's events, and ending or restoring a hold
	// moves units a buyer may be paying for.
	ClassHoldRedisOnly Class = "hold_redis_only"
	// ClassHoldLedgerOnly means holds are open in the ledger plus the hold
	// events in flight that Redis has ended, or no longer indexes for
	// expiry (so no sweeper would ever return their units). The finding
	// names them. It is reported, not repaired, for the same reason.
	ClassHoldLedgerOnly Class = "hold_ledger_only"
	// ClassCorruptRecord means something Redis keeps does not read as the
	// scripts read it (ledger.RecordKind), and every call that meets it
	// answers unavailable:
	//   - a receipt or hold record of the SKU: the finding names the
	//     request id (and the hold id); the repair rebuilds that one record
	//     from the ledger once the ledger holds every event up to the SKU's
	//     seq when the record was read;
	//   - the SKU's state (a key of another type, a live field or a buyer's
	//     count that does not parse): the finding names the key; the repair
	//     takes the SKU out of sale, waits until none of its events is in
	//     flight, and restores it from the ledger, which reopens it;
	//   - a key of a partition (its stream, expiry set or retired set): the
	//     finding names the key and no SKU; it is not repaired, see
	//     docs/operations.md.
	// Found when a call meets it, by any run (a SKU's state, a partition
	// key), or by a run that names the SKU (records, buyers' counts).
	ClassCorruptRecord Class = "corrupt_record"
)

// Figures are the numbers a finding compares.
type Figures struct {
	RedisStock  *int64
	RedisSeq    *int64
	RedisBuyers *int64
	// RedisReceipts is how many receipts Redis holds; LedgerDeductions
	// the ledger's distinct deduction request ids.
	RedisReceipts    *int64
	LedgerDeductions int64
	// RedisHeld and RedisOpenHolds are Redis's held units and open holds;
	// TruthHeld and TruthOpenHolds the ledger's plus those in flight.
	RedisHeld      *int64
	RedisOpenHolds *int64
	TruthHeld      int64
	TruthOpenHolds int64
	LedgerStock    int64
	LedgerSeq      int64
	LedgerCount    int64
	Holders        int64
	InFlight       int
	InFlightSum    int64
	TruthStock     int64
	TruthSeq       int64
	BalanceStock   *int64
	BalanceSeq     *int64
}

// SeqRange is an inclusive range of missing seqs.
type SeqRange struct {
	From int64
	To   int64
}

// Finding is one difference found for one SKU.
type Finding struct {
	SKU         string
	Class       Class
	Detail      string
	Before      Figures
	After       *Figures
	MissingSeqs []SeqRange
	// Lost lists acknowledged deductions found in neither Redis nor the ledger.
	Lost []LostReceipt
	// RequestID and HoldID name the record of a corrupt_record finding,
	// Key the Redis key of a SKU state or partition key that does not read.
	RequestID   string
	HoldID      string
	Key         string
	Repaired    bool
	RepairError string
}

// LostReceipt identifies an acknowledged deduction that was lost.
type LostReceipt struct {
	Seq       int64
	EventID   string
	RequestID string
	User      string
	Qty       int64
}

// Report is the outcome of one reconciliation run.
type Report struct {
	RunID    int64
	Trigger  string
	Started  time.Time
	Finished time.Time
	Checked  int
	// Lagging counts SKUs whose difference the in-flight events explain.
	Lagging  int
	Drifts   []Finding
	Repaired []Finding
	// Verified counts SKUs stamped as verified under the current Redis run
	// by this run; Unverified those still refusing purchases after it.
	Verified   int
	Unverified int
	// Unreachable counts SKUs not checked because their Redis Cluster
	// master did not answer.
	Unreachable int
}

// RecordedRun is a stored reconciliation run with its findings.
type RecordedRun struct {
	ID       int64
	Trigger  string
	Started  string
	Finished string
	Checked  int
	Drifts   int
	Repaired int
	Error    *string
	Findings []RecordedFinding
}

// RecordedFinding is one stored finding.
type RecordedFinding struct {
	SKU         string
	Class       Class
	Detail      string
	Before      RecordedFigures
	After       *Figures
	Repaired    bool
	RepairError *string
}

// RecordedFigures are a stored finding's figures before repair, with the
// seqs it found missing.
type RecordedFigures struct {
	Figures
	MissingSeqs []SeqRange
}
