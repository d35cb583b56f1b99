package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/ledger"
)

// driftClasses are the finding classes, which all count as drift.
var driftClasses = []Class{ClassRedisLow, ClassRedisHigh, ClassRedisBehind, ClassRedisMissing, ClassLedgerGap,
	ClassBalancesDrift, ClassBuyersDrift, ClassReceiptsMissing, ClassLostAcknowledged, ClassHeldDrift, ClassOpenHoldsDrift,
	ClassHoldRedisOnly, ClassHoldLedgerOnly, ClassCorruptRecord}

// Metrics are the reconciler's Prometheus instruments.
type Metrics struct {
	findings   *prometheus.CounterVec
	drifting   *prometheus.GaugeVec
	runs       *prometheus.CounterVec
	duration   prometheus.Histogram
	unverified prometheus.Gauge
	leader     prometheus.Gauge
	holdsOpen  prometheus.Gauge
	corrupt    *prometheus.CounterVec
}

// NewMetrics creates the reconciler's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_reconcile_findings_total",
			Help: "Reconciliation findings, by class.",
		}, []string{"class"}),
		drifting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "invledger_reconcile_drifting_skus",
			Help: "SKUs with a finding of this class in the last reconciliation run.",
		}, []string{"class"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_reconcile_runs_total",
			Help: "Reconciliation runs, by trigger and result (ok or error).",
		}, []string{"trigger", "result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "invledger_reconcile_duration_seconds",
			Help:    "Duration of one reconciliation run.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		unverified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "invledger_fenced_skus",
			Help: "SKUs refusing purchases as recovering because they are not yet verified under the current Redis run.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "invledger_reconciler_leader",
			Help: "1 while this process runs the periodic reconciler, which one process of a deployment does at a time.",
		}),
	}
	// No per-SKU label: /metrics is open to any scraper, and SKU ids would
	// name unreleased products and grow the series with the catalogue.
	m.holdsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "invledger_holds_open",
		Help: "Open holds in Redis over every SKU, as of the last reconciliation of every SKU.",
	})
	// The kind only: request ids are unbounded; the log line and the alert
	// name them.
	m.corrupt = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "invledger_corrupt_records_total",
		Help: "Corrupt receipts, hold records, SKU states and partition keys met by a call, the hold sweeper or a reconciliation, by kind; meetings while its repair runs count once.",
	}, []string{"kind"})
	reg.MustRegister(m.findings, m.drifting, m.runs, m.duration, m.unverified, m.leader, m.holdsOpen, m.corrupt)
	// Series that exist from the start let increase() see the first finding.
	for _, c := range driftClasses {
		m.findings.WithLabelValues(string(c))
	}
	for _, k := range ledger.RecordKinds {
		m.corrupt.WithLabelValues(string(k))
	}
	return m
}

func (m *Metrics) observeRun(rep Report, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.runs.WithLabelValues(rep.Trigger, result).Inc()
	m.duration.Observe(rep.Finished.Sub(rep.Started).Seconds())
	if err != nil {
		return
	}
	counts := map[Class]int{}
	for _, f := range rep.Drifts {
		counts[f.Class]++
		m.findings.WithLabelValues(string(f.Class)).Inc()
	}
	for _, c := range driftClasses {
		m.drifting.WithLabelValues(string(c)).Set(float64(counts[c]))
	}
}

// SetLeader records whether this process runs the periodic reconciler.
func (m *Metrics) SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}
