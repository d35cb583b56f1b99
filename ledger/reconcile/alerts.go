package reconcile

import (
	"context"
	"log/slog"
)

// FencedAlerter is told, about every 5 s while verification passes leave
// SKUs fenced, how many still refuse purchases as recovering. It must not
// block.
type FencedAlerter interface {
	Fenced(ctx context.Context, count int)
}

// DeadLetterAlerter is told about every stream entry the projector stored in
// dead_letters instead of the ledger. It must not block.
type DeadLetterAlerter interface {
	DeadLetter(ctx context.Context, stream, streamID, reason string)
}

// UnsafeRedisAlerter is told when Redis's persistence or eviction settings
// become unsafe, so sales stop (reason says what is wrong and how to fix
// it), and when they are safe again and sales resume. It must not block.
type UnsafeRedisAlerter interface {
	UnsafeRedis(ctx context.Context, reason string)
	SafeRedis(ctx context.Context)
}

// Notifier takes every kind of alert beyond the process, e.g. to a webhook.
type Notifier interface {
	Alerter
	FencedAlerter
	DeadLetterAlerter
	UnsafeRedisAlerter
}

// LogAlerter raises every alert as an slog ERROR line with its figures, and
// passes it on to a Notifier, if it has one.
type LogAlerter struct {
	log  *slog.Logger
	next Notifier
}

var _ Notifier = (*LogAlerter)(nil)

// NewLogAlerter returns an alerter that logs to log (slog.Default() if nil)
// and passes every alert on to next, if not nil.
func NewLogAlerter(log *slog.Logger, next Notifier) *LogAlerter {
	if log == nil {
		log = slog.Default()
	}
	return &LogAlerter{log: log, next: next}
}

// Alert logs the finding and passes it on.
func (a *LogAlerter) Alert(ctx context.Context, f Finding) {
	attrs := []any{"sku", f.SKU, "class", f.Class, "detail", f.Detail,
		"redis_stock", valueOf(f.Before.RedisStock), "redis_seq", valueOf(f.Before.RedisSeq), "ledger_stock", f.Before.LedgerStock,
		"ledger_seq", f.Before.LedgerSeq, "in_flight", f.Before.InFlight, "repaired", f.Repaired, "repair_error", f.RepairError}
	if f.Class == ClassCorruptRecord {
		// Not request_id: an API request's log lines carry its own under that key.
		attrs = append(attrs, "request_id", f.RequestID, "hold_id", f.HoldID)
	}
	a.log.ErrorContext(ctx, "reconciliation finding", attrs...)
	if a.next != nil {
		a.next.Alert(ctx, f)
	}
}

// valueOf logs a figure Redis may not have: its value, or "absent".
func valueOf(p *int64) slog.Value {
	if p == nil {
		return slog.StringValue("absent")
	}
	return slog.Int64Value(*p)
}

// DeadLetter logs a stream entry stored in dead_letters and passes it on.
func (a *LogAlerter) DeadLetter(ctx context.Context, stream, streamID, reason string) {
	a.log.ErrorContext(ctx, "stream entry sent to dead_letters", "stream", stream, "stream_id", streamID, "reason", reason)
	if a.next != nil {
		a.next.DeadLetter(ctx, stream, streamID, reason)
	}
}

// Fenced logs that count SKUs still refuse purchases and passes it on.
func (a *LogAlerter) Fenced(ctx context.Context, count int) {
	a.log.ErrorContext(ctx, "skus still fenced after verification; purchases get recovering", "count", count)
	if a.next != nil {
		a.next.Fenced(ctx, count)
	}
}

// UnsafeRedis logs that sales stopped because Redis's settings could lose
// them, and passes it on.
func (a *LogAlerter) UnsafeRedis(ctx context.Context, reason string) {
	a.log.ErrorContext(ctx, "redis settings are unsafe; sales stopped (503 unsafe_redis)", "reason", reason)
	if a.next != nil {
		a.next.UnsafeRedis(ctx, reason)
	}
}

// SafeRedis logs that Redis's settings are safe again and sales resumed,
// and passes it on.
func (a *LogAlerter) SafeRedis(ctx context.Context) {
	a.log.WarnContext(ctx, "redis settings are safe again; sales resumed")
	if a.next != nil {
		a.next.SafeRedis(ctx)
	}
}
