package projections

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
)

// Metrics are the projector's Prometheus instruments.
type Metrics struct {
	projected     *prometheus.CounterVec
	batchSize     prometheus.Histogram
	commitSeconds prometheus.Histogram
	commitErrors  prometheus.Counter
	deadLetters   prometheus.Counter
	pending       *prometheus.GaugeVec
	oldestUnacked *prometheus.GaugeVec
	trimmed       prometheus.Counter
}

// NewMetrics creates the projector's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		projected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_projected_events_total",
			Help: "Events inserted into the ledger by the projector, by event type. Redeliveries that were already projected are not counted.",
		}, []string{"type"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "invledger_projection_batch_events",
			Help:    "Events per group-commit transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "invledger_projection_commit_duration_seconds",
			Help:    "Duration of one group-commit transaction.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "invledger_projection_commit_errors_total",
			Help: "Group-commit transactions that failed; their events are retried.",
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "invledger_projection_dead_letters_total",
			Help: "Stream entries, and events of entries, that could not be projected and were stored in dead_letters.",
		}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "invledger_projection_pending_entries",
			Help: "Entries (not events: an entry of a batch holds several) delivered to the projector's consumer group but not yet acked, by partition stream.",
		}, []string{"stream"}),
		oldestUnacked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "invledger_projection_oldest_unacked_age_seconds",
			Help: "Age of the oldest entry not yet acked by the projector (pending or undelivered), by partition stream.",
		}, []string{"stream"}),
		trimmed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "invledger_stream_trimmed_entries_total",
			Help: "Acked stream entries removed by the janitor.",
		}),
	}
	reg.MustRegister(m.projected, m.batchSize, m.commitSeconds, m.commitErrors, m.deadLetters,
		m.pending, m.oldestUnacked, m.trimmed)
	return m
}

func (m *Metrics) observeBatch(size int, took time.Duration, inserted map[domain.EventType]int, err error) {
	m.batchSize.Observe(float64(size))
	if took > 0 {
		m.commitSeconds.Observe(took.Seconds())
	}
	if err != nil {
		m.commitErrors.Inc()
		return
	}
	for typ, n := range inserted {
		m.projected.WithLabelValues(string(typ)).Add(float64(n))
	}
}
