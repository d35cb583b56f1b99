package redisinventory

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
)

// SweepMetrics counts the holds the sweepers expire and how late.
type SweepMetrics struct {
	expired  prometheus.Counter
	lateness prometheus.Histogram
}

// NewSweepMetrics creates the metrics and registers them on reg.
func NewSweepMetrics(reg prometheus.Registerer) *SweepMetrics {
	m := &SweepMetrics{
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "invledger_holds_expired_total",
			Help: "Holds this process's sweeper expired; rate() is holds expired per second.",
		}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "invledger_hold_expiry_lateness_seconds",
			Help:    "Redis clock at a hold's expiry minus its deadline.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	reg.MustRegister(m.expired, m.lateness)
	return m
}

// Observe records one expired hold; it fits SweeperConfig.OnExpired.
func (m *SweepMetrics) Observe(_ domain.Hold, lateness time.Duration) {
	m.expired.Inc()
	m.lateness.Observe(max(lateness, 0).Seconds())
}
