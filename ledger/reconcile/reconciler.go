package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// LedgerView is the truth side.
type LedgerView interface {
	// Ping checks, quickly, that the ledger answers; a failure is
	// domain.ErrUnavailable.
	Ping(ctx context.Context) error
	// LedgerSnapshot folds the ledger of skus (nil: every SKU) together with
	// the balances rows, and says which of the inFlight events the ledger
	// holds and which of their holds it has ended, all from one snapshot.
	LedgerSnapshot(ctx context.Context, skus []string, inFlight []domain.Event) (LedgerFold, error)
	// KnownEventIDs returns which of ids the ledger holds now.
	KnownEventIDs(ctx context.Context, ids []string) (map[string]bool, error)
	// Seqs returns the seqs the ledger holds for sku.
	Seqs(ctx context.Context, sku domain.SKUID) ([]int64, error)
	AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error)
}

// LedgerFold is the ledger as LedgerSnapshot read it.
type LedgerFold struct {
	// SKUs are the folds by SKU id.
	SKUs map[string]domain.LedgerSummary
	// Known are the ids of the in-flight events the ledger holds already.
	Known map[string]bool
	// EndedHolds are the ids of the in-flight reserves' holds whose end
	// the ledger holds. The projector commits a partition's entries
	// concurrently, so a hold's end can reach the ledger before its
	// reserve: the hold is then ended, not open, though only its reserve
	// is still in flight.
	EndedHolds map[string]bool
}

// SKULister lists every defined SKU, and finds one: Get answers
// domain.ErrNotFound for a SKU never defined.
type SKULister interface {
	List(ctx context.Context) ([]domain.SKUID, error)
	Get(ctx context.Context, sku domain.SKUID) (domain.SKUDefinition, error)
}

// Restorer brings back what Redis lost of one SKU: its state, rebuilt from
// the ledger fold and stamped, or its tombstone when it was retired; and
// rebuilds one corrupt record from the ledger (ledger.Recovery.RepairRecord).
type Restorer interface {
	RepairSKU(ctx context.Context, sku domain.SKUID) error
	RepairRecord(ctx context.Context, rec ledger.CorruptRecord) (_ ledger.CorruptRecord, repaired bool, err error)
}

// BalanceRepairer repairs one SKU's drifted balances row by recomputing it
// from the ledger.
type BalanceRepairer interface {
	RebuildBalance(ctx context.Context, sku domain.SKUID) error
}

// RunStore persists runs and findings.
type RunStore interface {
	RecordRun(ctx context.Context, r Report, runErr error) (int64, error)
}

// LossJournal names deductions this process acknowledged beyond a seq.
type LossJournal interface {
	TakeBeyond(sku string, seq int64) []domain.Receipt
}

// Alerter is told about every finding. It must not block. If it is also a
// FencedAlerter, RunLoop tells it about SKUs left fenced.
type Alerter interface {
	Alert(ctx context.Context, f Finding)
}

// Config configures a Reconciler.
type Config struct {
	Inventory Inventory
	Ledger    LedgerView
	SKUs      SKULister
	Restorer  Restorer
	Rebuilder BalanceRepairer
	Runs      RunStore
	Alerts    Alerter
	// Journal, if set, lets verification after a restart name acknowledged
	// deductions that Redis lost before they reached the ledger.
	Journal LossJournal
	// Operations, if set, records every repair in the operations audit
	// trail, attributed to the context's actor (ledger.WithActor).
	Operations ledger.OperationLog
	Metrics    *Metrics
	Logger     *slog.Logger
	// RepairLock, if set, is held by every run that repairs, from its check
	// to its last repair, so runs of several processes (the periodic
	// leader's, an operator's on demand, an adjustment's) never repair the
	// same drift twice: the second run checks after the first repaired.
	RepairLock ledger.Lock
	// RecordRepairWait bounds the repair of a corrupt record a call met
	// (ReportCorrupt): it retries while the ledger is behind, then gives
	// up, alerts, and leaves the record to the next call that meets it or
	// to a run that names the SKU. Default 2 minutes.
	RecordRepairWait time.Duration
	// MaxRecordRepairs bounds the corrupt records being repaired at once;
	// beyond it a report is dropped, and the next call that meets the
	// record reports it again. Default 1000.
	MaxRecordRepairs int
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RecordRepairWait == 0 {
		c.RecordRepairWait = 2 * time.Minute
	}
	if c.MaxRecordRepairs == 0 {
		c.MaxRecordRepairs = 1000
	}
}

// Validate reports every missing dependency at once.
func (c Config) Validate() error {
	var errs []error
	for name, missing := range map[string]bool{"Inventory": c.Inventory == nil, "Ledger": c.Ledger == nil, "SKUs": c.SKUs == nil,
		"Restorer": c.Restorer == nil, "Rebuilder": c.Rebuilder == nil, "Runs": c.Runs == nil, "Alerts": c.Alerts == nil,
		"Metrics": c.Metrics == nil} {
		if missing {
			errs = append(errs, fmt.Errorf("reconcile: Config.%s is required", name))
		}
	}
	if c.RecordRepairWait < 0 || c.MaxRecordRepairs < 0 {
		errs = append(errs, errors.New("reconcile: Config.RecordRepairWait and MaxRecordRepairs must not be negative"))
	}
	return errors.Join(errs...)
}

// Reconciler checks SKUs. Runs are serialized: a run never races a repair
// of another run.
type Reconciler struct {
	cfg Config
	mu  sync.Mutex
	// records are the corrupt records being repaired (ReportCorrupt).
	records recordRepairs
	// stopRepairs cancels the background record repairs; Close waits for
	// them through repairs.
	stopRepairs context.CancelFunc
	repairsCtx  context.Context
	repairs     sync.WaitGroup
}

// New returns a reconciler.
func New(cfg Config) (*Reconciler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	repairsCtx, stop := context.WithCancel(context.Background())
	return &Reconciler{cfg: cfg, records: recordRepairs{active: map[recordKey]bool{}}, repairsCtx: repairsCtx, stopRepairs: stop}, nil
}

// Close stops the background repairs of corrupt records and waits for them
// to return, so none outlives the Redis and PostgreSQL clients it uses. A
// record left unrepaired is rebuilt when a call meets it again after the
// next start, or by a reconcile naming its SKU.
func (r *Reconciler) Close() {
	r.records.mu.Lock()
	r.stopRepairs()
	r.records.mu.Unlock()
	r.repairs.Wait()
}

// Options select what one run does.
type Options struct {
	// SKUs limits the run; empty means every defined SKU. A run that
	// names SKUs also reads each one's receipts and hold records for
	// corrupt ones; the periodic pass, naming none, never reads them all.
	SKUs []string
	// Repair corrects what can be corrected: Redis stock by compare-and-set,
	// lost Redis state by restore from the ledger, balances by recompute,
	// ledger gaps by re-projection from the stream.
	Repair bool
	// Trigger says why the run happened: interval, cli, api, redis_restart,
	// adjustment.
	Trigger string
}

// tracer names the span of each reconciliation run.
var tracer = otel.Tracer("github.com/invledger/invledger/ledger/reconcile")

// Run checks the SKUs, stamps the ones verified under the current Redis
// run, repairs if asked, records the run and alerts on every finding. A SKU
// of opts.SKUs never defined is domain.ErrNotFound, and nothing is recorded.
func (r *Reconciler) Run(ctx context.Context, opts Options) (_ Report, err error) {
	ctx, span := tracer.Start(ctx, "reconcile.run", trace.WithAttributes(attribute.String("invledger.trigger", opts.Trigger),
		attribute.Bool("invledger.repair", opts.Repair), attribute.Int("invledger.skus", len(opts.SKUs))))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	// A SKU named but never defined is the caller's mistake, not a run.
	for _, sku := range opts.SKUs {
		id, err := domain.NewSKUID(sku)
		if err == nil {
			_, err = r.cfg.SKUs.Get(ctx, id)
		}
		if err != nil {
			return Report{Trigger: opts.Trigger}, fmt.Errorf("reconcile sku %s: %w", sku, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if opts.Repair && r.cfg.RepairLock != nil {
		lease, err := r.cfg.RepairLock.Acquire(ctx)
		if err != nil {
			return Report{Trigger: opts.Trigger}, fmt.Errorf("wait for other processes' repairs: %w", err)
		}
		defer lease.Release(context.WithoutCancel(ctx))
	}
	rep := Report{Trigger: opts.Trigger, Started: time.Now(), Drifts: []Finding{}, Repaired: []Finding{}}
	err = r.run(ctx, opts, &rep)
	rep.Finished = time.Now()
	id, recErr := r.cfg.Runs.RecordRun(context.WithoutCancel(ctx), rep, err)
	rep.RunID = id
	r.cfg.Metrics.observeRun(rep, err)
	if err != nil {
		return rep, err
	}
	if recErr != nil {
		return rep, fmt.Errorf("record reconciliation run: %w", recErr)
	}
	if len(rep.Drifts) > 0 {
		r.cfg.Logger.Warn("reconciliation found drift", "run", rep.RunID, "trigger", rep.Trigger, "checked", rep.Checked,
			"drifts", len(rep.Drifts), "repaired", len(rep.Repaired))
	}
	return rep, nil
}

func (r *Reconciler) run(ctx context.Context, opts Options, rep *Report) error {
	skus := opts.SKUs
	if len(skus) == 0 {
		ids, err := r.cfg.SKUs.List(ctx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			skus = append(skus, id.String())
		}
	}
	checks, err := r.check(ctx, skus, len(opts.SKUs) == 0)
	if err != nil {
		return err
	}
	rep.Unreachable = len(skus) - len(checks)
	unverified := 0
	var holdsOpen int64
	var (
		stampSKUs []domain.SKUID
		stampSeqs []int64
	)
	for _, sku := range skus {
		c, ok := checks[sku]
		if !ok {
			continue
		}
		rep.Checked++
		if c.live.Corrupt != nil {
			// Nothing of it can be compared; its own repair restores and
			// stamps it, so it is not left to the passes that stamp.
			f := corruptFinding(ledger.CorruptRecord{SKU: c.sku, Kind: ledger.RecordSKU, Key: c.live.Corrupt.Key, Problem: c.live.Corrupt.Problem})
			f.Before = c.figures()
			r.takeFinding(ctx, c, f, opts, rep)
			continue
		}
		if c.live.Present {
			holdsOpen += c.live.OpenHolds
		}
		class, findings := classify(c)
		var unreachable bool
		if class == ClassRedisBehind {
			class, findings, unreachable = r.confirmBehind(ctx, c, findings)
		}
		if !unreachable && hasClass(findings, ClassReceiptsMissing) {
			class, findings, unreachable = r.confirmReceipts(ctx, c, class, findings)
		}
		if unreachable {
			// Its master went away between the two reads: the first read alone
			// cannot tell a lost event from one sold in between, so the SKU is
			// left for the next run, like one whose master did not answer.
			rep.Checked--
			rep.Unreachable++
			continue
		}
		if class == ClassLagging {
			rep.Lagging++
		}
		if class == ClassLedgerGap {
			r.describeGap(ctx, c, findings)
		}
		// Losses first, while the SKU is still fenced: once stamped it sells
		// again, and its new receipts would look like lost ones.
		if (c.live.Present && !c.live.Verified) || class == ClassRedisMissing {
			if f, ok := r.lostAcknowledged(ctx, c); ok {
				findings = append(findings, f)
			}
		}
		if len(opts.SKUs) > 0 && c.live.Present {
			findings = append(findings, r.corruptRecords(ctx, c)...)
		}
		if c.live.Present && !c.live.Verified {
			unverified++
			// A SKU whose tail was too long to read is verified by its seq
			// alone: a Redis that kept every event the ledger has lost
			// nothing the ledger could hand back, and the unread tail is in
			// its own stream, restored from the same AOF.
			if safeToStamp(findings) {
				stampSKUs, stampSeqs = append(stampSKUs, c.id), append(stampSeqs, c.live.Seq)
			}
		}
		for _, f := range findings {
			r.takeFinding(ctx, c, f, opts, rep)
		}
	}
	if len(stampSKUs) > 0 {
		stamped, err := r.cfg.Inventory.StampMany(ctx, stampSKUs, stampSeqs)
		if err != nil {
			r.cfg.Logger.Warn("stamp verified skus", "err", err)
		}
		for _, ok := range stamped {
			if ok {
				rep.Verified++
			}
		}
	}
	rep.Unverified = unverified - rep.Verified
	for _, f := range rep.Repaired {
		// Repairs of Redis-side drift restore or correct and stamp the SKU.
		switch f.Class {
		case ClassRedisLow, ClassRedisHigh, ClassRedisBehind, ClassRedisMissing, ClassBuyersDrift, ClassReceiptsMissing:
			if checks[f.SKU].live.Present && !checks[f.SKU].live.Verified {
				rep.Unverified--
			}
		}
	}
	r.cfg.Metrics.unverified.Set(float64(rep.Unverified))
	// Only a run that read every SKU knows the whole sum.
	if len(opts.SKUs) == 0 && rep.Unreachable == 0 {
		r.cfg.Metrics.holdsOpen.Set(float64(holdsOpen))
	}
	if opts.Repair {
		r.fillAfter(ctx, rep)
	}
	return nil
}

// takeFinding repairs f if the run repairs, alerts it, and adds it to rep.
func (r *Reconciler) takeFinding(ctx context.Context, c check, f Finding, opts Options, rep *Report) {
	alert := true
	switch {
	case f.Class == ClassCorruptRecord:
		alert = r.corruptInRun(ctx, &f, opts.Repair)
	case opts.Repair:
		r.repair(ctx, c, &f)
	}
	if alert {
		r.cfg.Alerts.Alert(ctx, f)
	}
	rep.Drifts = append(rep.Drifts, f)
	if f.Repaired {
		rep.Repaired = append(rep.Repaired, f)
		r.recordRepair(ctx, f)
	}
}

// check reads Redis first, then the ledger. The order matters: an event is
// either acked before the Redis snapshot, so committed before the ledger
// read, or still unacked in the snapshot's tail. Events committed in between
// are recognised by event id. The ledger is pinged before Redis is read: with
// PostgreSQL down the projector stops acking, the unacked tail grows, and
// reading it would only cost Redis time for a run that cannot finish.
func (r *Reconciler) check(ctx context.Context, skus []string, all bool) (map[string]check, error) {
	ids := make([]domain.SKUID, len(skus))
	for i, sku := range skus {
		id, err := domain.NewSKUID(sku)
		if err != nil {
			return nil, fmt.Errorf("reconcile %q: %w", sku, err)
		}
		ids[i] = id
	}
	if err := r.cfg.Ledger.Ping(ctx); err != nil {
		return nil, fmt.Errorf("reconcile: the ledger does not answer, so Redis was not read: %w", err)
	}
	snap, err := r.cfg.Inventory.Snapshot(ctx, ids)
	if err != nil {
		return nil, err
	}
	unreachable := make(map[domain.SKUID]bool, len(snap.Unreachable))
	for _, id := range snap.Unreachable {
		unreachable[id] = true
	}
	checks := make(map[string]check, len(skus))
	for _, id := range ids {
		if !unreachable[id] {
			checks[id.String()] = check{sku: id.String(), id: id, live: snap.SKUs[id]}
		}
	}
	for _, rec := range snap.CorruptKeys {
		r.ReportCorrupt(ctx, rec)
	}
	if len(snap.Unreachable) > 0 {
		r.cfg.Logger.Warn("reconcile: skus on Redis masters that did not answer, or of a partition with a key of the wrong type, were not checked",
			"skus", len(snap.Unreachable), "corrupt_keys", len(snap.CorruptKeys))
	}
	var inFlight []domain.Event
	for _, e := range snap.InFlight {
		c, ok := checks[e.SKU]
		if !ok {
			continue
		}
		c.inFlight = append(c.inFlight, e)
		checks[e.SKU] = c
		inFlight = append(inFlight, e)
	}
	var filter []string
	if !all {
		filter = skus
	}
	fold, err := r.cfg.Ledger.LedgerSnapshot(ctx, filter, inFlight)
	if err != nil {
		return nil, err
	}
	for sku, c := range checks {
		c.ledger = fold.SKUs[sku]
		c.inFlight = slices.DeleteFunc(c.inFlight, func(e domain.Event) bool { return fold.Known[e.ID] })
		slices.SortFunc(c.inFlight, func(a, b domain.Event) int { return int(a.Seq - b.Seq) })
		c.endedInLedger = fold.EndedHolds
		checks[sku] = c
	}
	return checks, nil
}

// confirmBehind looks again at a SKU whose Redis seemed behind its ledger,
// before anything is reported or restored. check reads Redis first, so
// events sold and projected between its two reads make the ledger look
// ahead of a healthy Redis. This read is ordered the other way, ledger
// first: a Redis seq only grows while Redis keeps its data, so a Redis still
// behind a ledger read before it has lost events, and one that is not was
// only read too early. It returns the class and findings to go on with.
// unreachable is true when Redis did not answer the second read.
func (r *Reconciler) confirmBehind(ctx context.Context, c check, findings []Finding) (_ Class, _ []Finding, unreachable bool) {
	ledger, live, err := r.reread(ctx, c)
	if errors.Is(err, domain.ErrUnavailable) {
		return ClassRedisBehind, findings, true
	}
	if err != nil {
		return ClassRedisBehind, unconfirmed(findings, err), false
	}
	if live.Present && live.Seq >= ledger.Seq {
		return ClassLagging, nil, false
	}
	return ClassRedisBehind, findings, false
}

// confirmReceipts looks again, ledger first as confirmBehind does, at a SKU
// whose Redis seemed to hold fewer receipts than its ledger has deductions:
// deductions sold and projected between check's two reads look like that
// too. Redis keeps every receipt it ever wrote, so one still short of a
// ledger read before it has lost some. It returns the class and findings
// to go on with, and, as confirmBehind, whether Redis did not answer.
func (r *Reconciler) confirmReceipts(ctx context.Context, c check, class Class, findings []Finding) (_ Class, _ []Finding, unreachable bool) {
	ledger, live, err := r.reread(ctx, c)
	if errors.Is(err, domain.ErrUnavailable) {
		return class, findings, true
	}
	if err != nil {
		for i := range findings {
			if findings[i].Class == ClassReceiptsMissing {
				unconfirmed(findings[i:i+1], err)
			}
		}
		return class, findings, false
	}
	if live.Present && live.Receipts < ledger.Deductions {
		return class, findings, false
	}
	findings = slices.DeleteFunc(findings, func(f Finding) bool { return f.Class == ClassReceiptsMissing })
	switch {
	case len(findings) > 0:
		return findings[0].Class, findings, false
	case class == ClassReceiptsMissing:
		return ClassLagging, nil, false // the ledger moved on between the reads
	}
	return class, findings, false
}

// reread reads c's SKU again, ledger first, then Redis.
func (r *Reconciler) reread(ctx context.Context, c check) (domain.LedgerSummary, LiveSKU, error) {
	fold, err := r.cfg.Ledger.LedgerSnapshot(ctx, []string{c.sku}, nil)
	if err != nil {
		return domain.LedgerSummary{}, LiveSKU{}, err
	}
	snap, err := r.cfg.Inventory.Snapshot(ctx, []domain.SKUID{c.id})
	if err != nil {
		return domain.LedgerSummary{}, LiveSKU{}, err
	}
	return fold.SKUs[c.sku], snap.SKUs[c.id], nil
}

func hasClass(findings []Finding, class Class) bool {
	return slices.ContainsFunc(findings, func(f Finding) bool { return f.Class == class })
}

// unconfirmed marks findings that a second look could not confirm, so that
// repair leaves them alone: no destructive repair rests on one observation.
func unconfirmed(findings []Finding, err error) []Finding {
	for i := range findings {
		findings[i].RepairError = fmt.Sprintf("not confirmed by a second read, so not repaired: %v", err)
	}
	return findings
}

// lostAcknowledged reports the deductions this process acknowledged beyond
// everything Redis, the stream and the ledger still hold for the SKU.
func (r *Reconciler) lostAcknowledged(ctx context.Context, c check) (Finding, bool) {
	if r.cfg.Journal == nil {
		return Finding{}, false
	}
	fig := c.figures()
	held := max(fig.TruthSeq, c.live.Seq)
	candidates := r.cfg.Journal.TakeBeyond(c.sku, held)
	if len(candidates) == 0 {
		return Finding{}, false
	}
	// A batch the projector was committing when Redis died may land after
	// the check; what reached the ledger is not lost.
	ids := make([]string, len(candidates))
	for i, rc := range candidates {
		ids[i] = rc.EventID
	}
	known, err := r.cfg.Ledger.KnownEventIDs(ctx, ids)
	if err != nil {
		r.cfg.Logger.Warn("look up possibly lost deductions", "sku", c.sku, "err", err)
	}
	lost := slices.DeleteFunc(candidates, func(rc domain.Receipt) bool { return known[rc.EventID] })
	if len(lost) == 0 {
		return Finding{}, false
	}
	f := Finding{SKU: c.sku, Class: ClassLostAcknowledged, Before: fig,
		Detail: fmt.Sprintf("%d acknowledged deductions after seq %d are in neither Redis nor the ledger: Redis lost them before they were projected", len(lost), held)}
	for _, rc := range lost {
		f.Lost = append(f.Lost, LostReceipt{Seq: rc.Seq, EventID: rc.EventID, RequestID: rc.RequestID, User: rc.User, Qty: rc.Qty})
	}
	return f, true
}

// safeToStamp says whether a SKU that Redis restarted under agrees with the
// ledger and the stream. SKUs with Redis-side drift stay fenced until their
// repair, which stamps them.
func safeToStamp(findings []Finding) bool {
	for _, f := range findings {
		switch f.Class {
		case ClassRedisLow, ClassRedisHigh, ClassRedisBehind, ClassRedisMissing, ClassBuyersDrift, ClassReceiptsMissing:
			return false
		}
	}
	return true
}

func (r *Reconciler) describeGap(ctx context.Context, c check, findings []Finding) {
	seqs, err := r.cfg.Ledger.Seqs(ctx, c.id)
	if err != nil {
		r.cfg.Logger.Warn("read ledger seqs", "sku", c.sku, "err", err)
		return
	}
	for _, e := range c.inFlight {
		seqs = append(seqs, e.Seq)
	}
	upTo := max(c.live.Seq, c.ledger.Seq)
	for i := range findings {
		if findings[i].Class == ClassLedgerGap {
			findings[i].MissingSeqs = seqRanges(seqs, upTo)
		}
	}
}

// repair corrects one finding where that is safe, and says why not otherwise.
func (r *Reconciler) repair(ctx context.Context, c check, f *Finding) {
	sku, err := domain.NewSKUID(c.sku)
	if err != nil {
		f.RepairError = err.Error()
		return
	}
	fail := func(err error) { f.RepairError = err.Error() }
	if f.RepairError != "" { // already refused, e.g. unconfirmed
		return
	}
	switch f.Class {
	case ClassRedisHigh, ClassRedisLow:
		if f.Class == ClassRedisHigh {
			// Fence first: no purchase may run on the excess while it is removed.
			if ok, err := r.cfg.Inventory.Fence(ctx, sku, c.live.Seq); err != nil || !ok {
				fail(errors.Join(err, errSeqMoved))
				return
			}
		}
		ok, err := r.cfg.Inventory.Correct(ctx, sku, c.live.Seq, f.Before.TruthStock)
		if err != nil || !ok {
			fail(errors.Join(err, errSeqMoved))
			return
		}
		f.Repaired = true
	case ClassRedisBehind, ClassRedisMissing, ClassBuyersDrift, ClassReceiptsMissing:
		if len(c.inFlight) > 0 || c.live.TailTruncated {
			fail(fmt.Errorf("%d events are still in flight; restoring now would drop them, retrying after the projector catches up", len(c.inFlight)))
			return
		}
		if err := r.cfg.Restorer.RepairSKU(ctx, c.id); err != nil {
			fail(err)
			return
		}
		f.Repaired = true
	case ClassBalancesDrift:
		if err := r.cfg.Rebuilder.RebuildBalance(ctx, c.id); err != nil {
			fail(err)
			return
		}
		f.Repaired = true
	case ClassLedgerGap:
		r.reproject(ctx, sku, f)
	}
}

var errSeqMoved = errors.New("a purchase moved the seq since the check; the next run retries")

// reproject re-inserts missing seqs from the stream, where it still has them.
func (r *Reconciler) reproject(ctx context.Context, sku domain.SKUID, f *Finding) {
	var want []int64
	for _, rg := range f.MissingSeqs {
		for s := rg.From; s <= rg.To && len(want) < 100_000; s++ {
			want = append(want, s)
		}
	}
	if len(want) == 0 {
		f.RepairError = "no missing seq range known"
		return
	}
	events, err := r.cfg.Inventory.StreamEvents(ctx, sku, want)
	if err != nil {
		f.RepairError = err.Error()
		return
	}
	if len(events) > 0 {
		if _, err := r.cfg.Ledger.AppendBatch(ctx, events); err != nil {
			f.RepairError = err.Error()
			return
		}
	}
	if len(events) < len(want) {
		f.RepairError = fmt.Sprintf("re-projected %d of %d missing events; the stream no longer holds the rest, so they cannot be recovered", len(events), len(want))
		return
	}
	f.Repaired = true
}

// fillAfter re-checks repaired SKUs so each finding records the figures the
// repair left behind.
func (r *Reconciler) fillAfter(ctx context.Context, rep *Report) {
	var skus []string
	for _, f := range rep.Drifts {
		if f.Repaired && !slices.Contains(skus, f.SKU) {
			skus = append(skus, f.SKU)
		}
	}
	if len(skus) == 0 {
		return
	}
	after, err := r.check(ctx, skus, false)
	if err != nil {
		r.cfg.Logger.Warn("re-check after repair", "err", err)
		return
	}
	for _, list := range [][]Finding{rep.Drifts, rep.Repaired} {
		for i := range list {
			if c, ok := after[list[i].SKU]; ok && list[i].Repaired {
				fig := c.figures()
				list[i].After = &fig
			}
		}
	}
}

// recordRepair adds a repair to the operations audit trail. The repair is
// done and the run records it too, so a failure here is logged, not fatal.
func (r *Reconciler) recordRepair(ctx context.Context, f Finding) {
	if r.cfg.Operations == nil {
		return
	}
	op := domain.Operation{SKU: f.SKU, Action: domain.ActionRepair, Actor: ledger.ActorFrom(ctx), Detail: string(f.Class) + ": " + f.Detail}
	if err := r.cfg.Operations.Record(ctx, op); err != nil {
		r.cfg.Logger.ErrorContext(ctx, "record a repair in the operations trail", "sku", f.SKU, "class", f.Class, "err", err)
	}
}
