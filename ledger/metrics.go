package ledger

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
)

// InventoryMetrics instruments the purchase path: the outcome of every
// script call, deductions and holds alike, script failures that are not
// purchase outcomes, and the holds expiry ended. Only deductions are timed:
// the latency histogram is the flash sale's purchase latency, the figure
// the benchmarks quote, and a reserve runs the same checks in the same one
// round trip.
type InventoryMetrics struct {
	latency      *prometheus.HistogramVec
	outcomes     *prometheus.CounterVec
	scriptErrors *prometheus.CounterVec
	expired      prometheus.Counter
	lateness     prometheus.Histogram
	batchSize    prometheus.Histogram
	inFlight     prometheus.Gauge
}

// NewInventoryMetrics creates the metrics and registers them on reg.
func NewInventoryMetrics(reg prometheus.Registerer) *InventoryMetrics {
	m := &InventoryMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "invledger_deduction_duration_seconds",
			Help:    "Latency of one deduction, one Redis round trip, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"outcome"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_inventory_operations_total",
			Help: "Inventory script calls, by operation (deduct, release, warm, reserve, confirm, cancel) and outcome.",
		}, []string{"operation", "outcome"}),
		scriptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_redis_script_errors_total",
			Help: "Inventory script calls that failed for a reason other than a purchase outcome: Redis unreachable, timeouts, unexpected replies.",
		}, []string{"operation"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "invledger_holds_expired_total",
			Help: "Holds this process's hold expiry expired; rate() is holds expired per second.",
		}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "invledger_hold_expiry_lateness_seconds",
			Help:    "Redis clock at a hold's expiry minus its deadline.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "invledger_purchase_batch_size",
			Help:    "Purchase attempts (deducts and reserves) of the SKUs of one partition sent to Redis in one script call.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000},
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "invledger_purchase_batches_in_flight",
			Help: "Purchase script calls sent to Redis and not yet answered, all partitions together.",
		}),
	}
	reg.MustRegister(m.latency, m.outcomes, m.scriptErrors, m.expired, m.lateness, m.batchSize, m.inFlight)
	// Series that exist from the start let increase() see the first error.
	for _, op := range []string{"deduct", "release", "warm", "reserve", "confirm", "cancel", "expire"} {
		m.scriptErrors.WithLabelValues(op)
	}
	return m
}

// Wrap returns inv with every call measured.
func (m *InventoryMetrics) Wrap(inv Inventory) Inventory {
	return &measuredInventory{Inventory: inv, m: m}
}

type measuredInventory struct {
	Inventory
	m *InventoryMetrics
}

func (mi *measuredInventory) Deduct(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID, eventID string) (domain.Receipt, error) {
	start := time.Now()
	rc, err := mi.Inventory.Deduct(ctx, sku, user, qty, req, eventID)
	outcome := mi.m.record("deduct", err)
	mi.m.latency.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	return rc, err
}

func (mi *measuredInventory) Release(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID, reason domain.Reason, eventID string) (domain.ReleaseReceipt, error) {
	rel, err := mi.Inventory.Release(ctx, sku, user, req, reason, eventID)
	mi.m.record("release", err)
	return rel, err
}

func (mi *measuredInventory) Warm(ctx context.Context, def domain.SKUDefinition, eventID string) (domain.StockState, bool, error) {
	st, stocked, err := mi.Inventory.Warm(ctx, def, eventID)
	mi.m.record("warm", err)
	return st, stocked, err
}

// WrapOrders returns inv with every hold call, and every release an
// order's undo makes, counted as Wrap counts deductions.
func (m *InventoryMetrics) WrapOrders(inv OrderInventory) OrderInventory {
	return &measuredOrders{OrderInventory: inv, m: m}
}

type measuredOrders struct {
	OrderInventory
	m *InventoryMetrics
}

func (mo *measuredOrders) Reserve(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID,
	ttl domain.HoldTTL, orderID string, eventID string) (domain.Hold, error) {
	h, err := mo.OrderInventory.Reserve(ctx, sku, user, qty, req, ttl, orderID, eventID)
	mo.m.record("reserve", err)
	return h, err
}

func (mo *measuredOrders) ConfirmHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error) {
	h, err := mo.OrderInventory.ConfirmHold(ctx, sku, hold, eventID)
	mo.m.record("confirm", err)
	return h, err
}

func (mo *measuredOrders) CancelHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error) {
	h, err := mo.OrderInventory.CancelHold(ctx, sku, hold, eventID)
	mo.m.record("cancel", err)
	return h, err
}

func (mo *measuredOrders) Release(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID, reason domain.Reason, eventID string) (domain.ReleaseReceipt, error) {
	rel, err := mo.OrderInventory.Release(ctx, sku, user, req, reason, eventID)
	mo.m.record("release", err)
	return rel, err
}

// ObservePurchaseBatch records the size of one purchase batch the
// inventory sent: the attempts of one SKU that shared a script call.
func (m *InventoryMetrics) ObservePurchaseBatch(size int) { m.batchSize.Observe(float64(size)) }

// ObservePurchaseBatchesInFlight adds delta to the purchase script calls
// in flight: +1 when one leaves, -1 when it returns.
func (m *InventoryMetrics) ObservePurchaseBatchesInFlight(delta int) { m.inFlight.Add(float64(delta)) }

// observeExpiry records one hold that expiry ended.
func (m *InventoryMetrics) observeExpiry(lateness time.Duration) {
	m.expired.Inc()
	m.lateness.Observe(max(lateness, 0).Seconds())
}

// record counts one call and returns its outcome label.
func (m *InventoryMetrics) record(op string, err error) string {
	outcome := Outcome(err)
	m.outcomes.WithLabelValues(op, outcome).Inc()
	if outcome == "error" {
		m.scriptErrors.WithLabelValues(op).Inc()
	}
	return outcome
}

// Outcome is the metrics label of an inventory call's result: "ok", or the
// domain.Code of the refusal. Failures that no rule gave (Redis unreachable
// or slow, an unexpected reply, a corrupt ledger) are all "error", which
// also counts them as script errors.
func Outcome(err error) string {
	switch code := domain.CodeOf(err); code {
	case domain.CodeInternal, domain.CodeUnavailable, domain.CodeCorruptLedger:
		return "error"
	default:
		return string(code)
	}
}
