package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// recordKey identifies a record: its SKU, kind, and request id (receipt)
// or hold id (hold record).
type recordKey struct {
	sku  string
	kind ledger.RecordKind
	id   string
}

func keyOf(rec ledger.CorruptRecord) recordKey {
	switch rec.Kind {
	case ledger.RecordHold:
		return recordKey{rec.SKU, rec.Kind, rec.HoldID}
	case ledger.RecordSKU:
		return recordKey{rec.SKU, rec.Kind, ""} // one restore, whatever key met it
	case ledger.RecordPartitionKey:
		return recordKey{"", rec.Kind, rec.Key}
	}
	return recordKey{rec.SKU, rec.Kind, rec.RequestID}
}

// recordOf is the record a corrupt_record finding names.
func recordOf(f Finding) ledger.CorruptRecord {
	rec := ledger.CorruptRecord{SKU: f.SKU, Kind: ledger.RecordReceipt, RequestID: f.RequestID, HoldID: f.HoldID, Key: f.Key}
	switch {
	case f.HoldID != "":
		rec.Kind = ledger.RecordHold
	case f.Key != "" && f.SKU == "":
		rec.Kind = ledger.RecordPartitionKey
	case f.Key != "":
		rec.Kind = ledger.RecordSKU
	}
	return rec
}

// recordRepairs are the records ReportCorrupt is repairing, so a record
// that every retry meets again is repaired once.
type recordRepairs struct {
	mu     sync.Mutex
	active map[recordKey]bool
}

// ReportCorrupt takes a corrupt record that a call met: the call answered
// unavailable, and its retries will until the record is rebuilt. It counts
// the record in invledger_corrupt_records_total, logs it and alerts, naming
// the SKU and the request id, and rebuilds it from the ledger in the
// background: once the ledger holds every event up to the SKU's seq when
// the record was read, retrying while it does not, for at most
// Config.RecordRepairWait. A record already being repaired is only
// counted once. It never blocks: it satisfies
// redisinventory.CorruptRecordReporter, on the purchase path.
func (r *Reconciler) ReportCorrupt(ctx context.Context, rec ledger.CorruptRecord) {
	key := keyOf(rec)
	r.records.mu.Lock()
	busy, full := r.records.active[key], len(r.records.active) >= r.cfg.MaxRecordRepairs
	// Close cancels repairsCtx under records.mu, so no repair is added to
	// r.repairs once Close waits on it.
	closed := r.repairsCtx.Err() != nil
	spawn := !busy && !full && !closed
	if spawn {
		r.records.active[key] = true
		r.repairs.Add(1)
	}
	r.records.mu.Unlock()
	if busy {
		return
	}
	r.cfg.Metrics.corrupt.WithLabelValues(string(rec.Kind)).Inc()
	r.cfg.Logger.ErrorContext(ctx, "corrupt record met: its calls answer unavailable until it is rebuilt from the ledger",
		"sku", rec.SKU, "kind", rec.Kind, "request_id", rec.RequestID, "hold_id", rec.HoldID)
	if full {
		r.cfg.Logger.WarnContext(ctx, "too many corrupt records being repaired; this one waits for the next call that meets it",
			"sku", rec.SKU, "request_id", rec.RequestID, "hold_id", rec.HoldID, "repairing", r.cfg.MaxRecordRepairs)
		return
	}
	if closed {
		// Shutting down: the next start repairs it when a call meets it.
		return
	}
	r.cfg.Alerts.Alert(ctx, corruptFinding(rec))
	if rec.Kind == ledger.RecordPartitionKey {
		// Not repaired here (docs/operations.md): the key stays reported,
		// so its calls count and alert it again only after a while.
		go func() {
			defer r.repairs.Done()
			r.quietFor(rec, key)
		}()
		return
	}
	// The repair outlives the call that met the record, but keeps its
	// logging attributes; RecordRepairWait and Close bound it.
	repairCtx, stop := context.WithCancel(ledger.WithDefaultActor(context.WithoutCancel(ctx), "system:repair"))
	unhook := context.AfterFunc(r.repairsCtx, stop)
	go func() {
		defer r.repairs.Done()
		defer unhook()
		defer stop()
		r.repairReported(repairCtx, rec, key)
	}()
}

// quietFor keeps a corrupt partition key reported for RecordRepairWait,
// or until Close, so the calls that meet it meanwhile neither count nor
// alert it again.
func (r *Reconciler) quietFor(rec ledger.CorruptRecord, key recordKey) {
	select {
	case <-r.repairsCtx.Done():
	case <-time.After(r.cfg.RecordRepairWait):
	}
	r.records.mu.Lock()
	delete(r.records.active, key)
	r.records.mu.Unlock()
}

// repairReported repairs rec, retrying while the ledger is behind or a
// server does not answer, until RecordRepairWait has passed.
func (r *Reconciler) repairReported(ctx context.Context, rec ledger.CorruptRecord, key recordKey) {
	defer func() {
		r.records.mu.Lock()
		delete(r.records.active, key)
		r.records.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RecordRepairWait)
	defer cancel()
	f := corruptFinding(rec)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := r.repairRecord(ctx, &f)
		if err == nil || !retryRecordRepair(err) || ctx.Err() != nil {
			break
		}
		f.RepairError = ""
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	switch {
	case f.Repaired:
		r.recordRepair(ctx, f)
	case r.repairsCtx.Err() != nil:
		// Stopped by Close, not failed: the first alert stands.
		r.cfg.Logger.InfoContext(ctx, "corrupt record left for the next start: the reconciler closed during its repair",
			"sku", rec.SKU, "kind", rec.Kind, "request_id", rec.RequestID, "hold_id", rec.HoldID)
	case f.RepairError != "":
		r.cfg.Alerts.Alert(ctx, f)
	}
}

// retryRecordRepair tells a record repair that may succeed later: the
// ledger is behind (or Redis ahead of it), a server did not answer, the
// SKU is being verified or restored, or the record changed meanwhile (the
// next probe says how).
func retryRecordRepair(err error) bool {
	return errors.Is(err, ledger.ErrLedgerBehind) || errors.Is(err, ledger.ErrRedisAhead) || errors.Is(err, domain.ErrUnavailable) ||
		errors.Is(err, domain.ErrRecovering) || errors.Is(err, ledger.ErrSeqMoved) || errors.Is(err, domain.ErrConflict)
}

// corruptFinding is the finding of rec, naming its request id and hold
// id, or its key.
func corruptFinding(rec ledger.CorruptRecord) Finding {
	f := Finding{SKU: rec.SKU, Class: ClassCorruptRecord, RequestID: rec.RequestID, HoldID: rec.HoldID, Key: rec.Key,
		Detail: fmt.Sprintf("the %s does not parse: calls that meet it answer unavailable until it is rebuilt from the ledger", rec)}
	switch rec.Kind {
	case ledger.RecordSKU:
		f.Detail = fmt.Sprintf("the %s does not read: the sku answers unavailable until it is restored from the ledger", rec)
	case ledger.RecordPartitionKey:
		f.Detail = fmt.Sprintf("the %s holds another type: the partition's skus answer unavailable; "+
			"it is not rebuilt automatically, see docs/operations.md, \"A Redis key of the wrong type\"", rec)
	}
	return f
}

// repairRecord rebuilds the record of a corrupt_record finding from the
// ledger, once, and returns why it did not.
func (r *Reconciler) repairRecord(ctx context.Context, f *Finding) error {
	switch rec := recordOf(*f); rec.Kind {
	case ledger.RecordSKU:
		return r.repairSKUState(ctx, f)
	case ledger.RecordPartitionKey:
		err := errors.New("a partition key is not rebuilt automatically: see docs/operations.md")
		f.RepairError = err.Error()
		return err
	}
	rec, repaired, err := r.cfg.Restorer.RepairRecord(ctx, recordOf(*f))
	f.RequestID = rec.RequestID
	switch {
	case err != nil:
		f.RepairError = err.Error()
	case repaired:
		f.Repaired = true
	default:
		// Sound by now: another process repaired it, or a restore rewrote it.
		f.Repaired = true
		f.Detail += " (found sound again when its repair began)"
	}
	return err
}

// repairSKUState restores from the ledger the SKU of a corrupt_record
// finding whose state does not read: it takes the SKU out of sale, so no
// event of it can be added, and restores it once the ledger holds every
// event its stream does. While some are in flight the answer is
// ledger.ErrLedgerBehind, and the SKU stays out of sale.
func (r *Reconciler) repairSKUState(ctx context.Context, f *Finding) error {
	fail := func(err error) error {
		f.RepairError = err.Error()
		return err
	}
	id, err := domain.NewSKUID(f.SKU)
	if err != nil {
		return fail(err)
	}
	fault, err := r.cfg.Inventory.Quarantine(ctx, id)
	switch {
	case err != nil:
		return fail(err)
	case !fault.Found():
		// Sound by now: another process restored it.
		f.Repaired = true
		f.Detail += " (found sound again when its repair began)"
		return nil
	case !fault.Restore:
		f.Repaired = true
		f.Detail += fmt.Sprintf(" (%s: %s, cleared: it held only console figures)", fault.Key, fault.Problem)
		return nil
	}
	checks, err := r.check(ctx, []string{f.SKU}, false)
	if err != nil {
		return fail(err)
	}
	c, ok := checks[f.SKU]
	switch {
	case !ok:
		return fail(fmt.Errorf("%w: the sku's Redis master did not answer", domain.ErrUnavailable))
	case len(c.inFlight) > 0 || c.live.TailTruncated:
		return fail(fmt.Errorf("%w: %d events of the sku are still in flight; the sku stays out of sale until the projector has them",
			ledger.ErrLedgerBehind, len(c.inFlight)))
	}
	if err := r.cfg.Restorer.RepairSKU(ctx, id); err != nil {
		return fail(err)
	}
	f.Repaired = true
	return nil
}

// corruptInRun takes a corrupt_record finding of a run: unless a repair
// of it is under way already (a call met it: it was counted and alerted
// then), it is counted and, if the run repairs, repaired now. A repair
// that must wait (the ledger behind, a server not answering) goes on in
// the background as a reported one, which alerts once, instead of being
// tried and alerted by every run meanwhile: the passes after a Redis
// restart come five times a second. alert says whether the run alerts it.
func (r *Reconciler) corruptInRun(ctx context.Context, f *Finding, repair bool) (alert bool) {
	rec := recordOf(*f)
	key := keyOf(rec)
	r.records.mu.Lock()
	busy := r.records.active[key]
	if !busy && repair {
		r.records.active[key] = true
	}
	r.records.mu.Unlock()
	if busy {
		f.Detail += " (its repair is under way)"
		return false
	}
	if !repair {
		return true
	}
	err := r.repairRecord(ctx, f)
	r.records.mu.Lock()
	delete(r.records.active, key)
	r.records.mu.Unlock()
	if err != nil && retryRecordRepair(err) && ctx.Err() == nil {
		f.Detail += fmt.Sprintf(" (its repair waits and goes on in the background: %s)", f.RepairError)
		f.RepairError = ""
		r.ReportCorrupt(ctx, rec)
		return false
	}
	r.cfg.Metrics.corrupt.WithLabelValues(string(rec.Kind)).Inc()
	return true
}

// corruptRecords reports the corrupt records of a SKU a run names.
func (r *Reconciler) corruptRecords(ctx context.Context, c check) []Finding {
	recs, err := r.cfg.Inventory.CorruptRecords(ctx, c.id)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "look for corrupt records", "sku", c.sku, "err", err)
		return nil
	}
	findings := make([]Finding, len(recs))
	for i, rec := range recs {
		findings[i] = corruptFinding(rec)
		findings[i].Before = c.figures()
	}
	return findings
}
