package alertwebhook

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the webhook's Prometheus instruments.
type Metrics struct {
	deliveries *prometheus.CounterVec
}

// NewMetrics creates the webhook's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "invledger_alert_webhook_deliveries_total",
		Help: "Alert webhook deliveries, by result: delivered, failed (after retries) or dropped (queue full).",
	}, []string{"result"})}
	reg.MustRegister(m.deliveries)
	// Every result has its series from the start, at zero, so that a rate
	// or an alert on failures works before the first webhook fires.
	for _, result := range []string{"delivered", "failed", "dropped"} {
		m.deliveries.WithLabelValues(result)
	}
	return m
}
