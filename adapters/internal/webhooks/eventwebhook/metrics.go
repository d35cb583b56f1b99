package eventwebhook

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the business-event webhooks' Prometheus instruments.
type Metrics struct {
	attempts *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "invledger_event_webhook_attempts_total",
		Help: "Business-event webhook delivery attempts, by result: delivered, or failed (it is retried with backoff).",
	}, []string{"result"})}
	reg.MustRegister(m.attempts)
	for _, result := range []string{"delivered", "failed"} {
		m.attempts.WithLabelValues(result)
	}
	return m
}
