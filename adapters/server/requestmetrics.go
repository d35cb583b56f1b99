package server

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics counts and times the API's answers by route pattern and
// status. It looks the children of a route and status up once: the vecs'
// WithLabelValues hashes the labels, and Itoa allocates, on every call.
// The routes are the mux's patterns and the statuses the API's few, so the
// cache stays as small as the series it stands for.
type requestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu       sync.RWMutex
	children map[routeStatus]requestChildren
}

type routeStatus struct {
	route  string
	status int
}

type requestChildren struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newRequestMetrics(requests *prometheus.CounterVec, duration *prometheus.HistogramVec) *requestMetrics {
	return &requestMetrics{requests: requests, duration: duration, children: map[routeStatus]requestChildren{}}
}

// observe records one answer; it is httpapi.Config.OnRequest.
func (m *requestMetrics) observe(route string, status int, elapsed time.Duration) {
	k := routeStatus{route, status}
	m.mu.RLock()
	c, ok := m.children[k]
	m.mu.RUnlock()
	if !ok {
		c = requestChildren{m.requests.WithLabelValues(route, strconv.Itoa(status)), m.duration.WithLabelValues(route)}
		m.mu.Lock()
		m.children[k] = c
		m.mu.Unlock()
	}
	c.requests.Inc()
	c.duration.Observe(elapsed.Seconds())
}
