package brokerexport

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the broker export's instruments, labelled by broker (nats, amqp).
type Metrics struct {
	published  *prometheus.CounterVec
	failures   *prometheus.CounterVec
	lagEvents  *prometheus.GaugeVec
	lagSeconds *prometheus.GaugeVec
	delay      *prometheus.HistogramVec
	up         *prometheus.GaugeVec
	paused     *prometheus.GaugeVec
	path       *prometheus.GaugeVec
	leader     prometheus.Gauge
}

// NewMetrics registers the export's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "invledger_export_published_total",
			Help: "Ledger events the broker confirmed, by broker."}, []string{"broker"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "invledger_export_failures_total",
			Help: "Failed connects, reads and publishes of the broker export, by broker."}, []string{"broker"}),
		lagEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "invledger_export_lag_events",
			Help: "Ledger events not yet confirmed by the broker, by broker."}, []string{"broker"}),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "invledger_export_lag_seconds",
			Help: "Age of the oldest ledger event not yet confirmed by the broker, by broker."}, []string{"broker"}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "invledger_export_delay_seconds",
			Help:    "Time from an event to the broker's confirmation of its publish, by broker.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"broker"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "invledger_export_up",
			Help: "1 when the broker export's last connect or publish succeeded, 0 when it failed, by broker."}, []string{"broker"}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "invledger_export_paused_skus",
			Help: "SKUs left out of the broker export because their subject holds messages it did not publish, by broker."}, []string{"broker"}),
		path: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "invledger_export_path",
			Help: "1 for how the broker export publishes (atomic_batch, per_sku, window), by broker."}, []string{"broker", "path"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "invledger_export_leader",
			Help: "1 while this process leads the broker export."}),
	}
	reg.MustRegister(m.published, m.failures, m.lagEvents, m.lagSeconds, m.delay, m.up, m.paused, m.path, m.leader)
	return m
}

// SetLeader records whether this process leads the export.
func (m *Metrics) SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// setPath records how broker's batches are published.
func (m *Metrics) setPath(broker, path string) {
	m.path.DeletePartialMatch(prometheus.Labels{"broker": broker})
	m.path.WithLabelValues(broker, path).Set(1)
}
