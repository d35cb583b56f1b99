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
	if rec.Kind == ledger.RecordHold {
		return recordKey{rec.SKU, rec.Kind, rec.HoldID}
	}
	return recordKey{rec.SKU, rec.Kind, rec.RequestID}
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
// ledger is behind, a server did not answer, the SKU is being verified or
// restored, or the record changed meanwhile (the next probe says how).
func retryRecordRepair(err error) bool {
	return errors.Is(err, ledger.ErrLedgerBehind) || errors.Is(err, domain.ErrUnavailable) ||
		errors.Is(err, domain.ErrRecovering) || errors.Is(err, ledger.ErrSeqMoved)
}

// corruptFinding is the finding of rec, naming its request id and hold id.
func corruptFinding(rec ledger.CorruptRecord) Finding {
	return Finding{SKU: rec.SKU, Class: ClassCorruptRecord, RequestID: rec.RequestID, HoldID: rec.HoldID,
		Detail: fmt.Sprintf("the %s does not parse: calls that meet it answer unavailable until it is rebuilt from the ledger", rec)}
}

// repairRecord rebuilds the record of a corrupt_record finding from the
// ledger, once, and returns why it did not.
func (r *Reconciler) repairRecord(ctx context.Context, f *Finding) error {
	kind := ledger.RecordReceipt
	if f.HoldID != "" {
		kind = ledger.RecordHold
	}
	rec, repaired, err := r.cfg.Restorer.RepairRecord(ctx, ledger.CorruptRecord{SKU: f.SKU, Kind: kind, RequestID: f.RequestID, HoldID: f.HoldID})
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
