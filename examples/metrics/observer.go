package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// metrics is an advisory.Observer that keeps Prometheus metrics.
type metrics struct {
	acquisitions *prometheus.CounterVec
	wait         *prometheus.HistogramVec
	releases     *prometheus.CounterVec
	losses       prometheus.Counter
}

var _ advisory.Observer = (*metrics)(nil)

// newMetrics registers the metrics with reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgadvisory_acquisitions_total",
			Help: "Attempts to take advisory locks, by operation and outcome.",
		}, []string{"op", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pgadvisory_wait_seconds",
			Help:    "Time from sending a lock statement to its answer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"op"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgadvisory_releases_total",
			Help: "Releases of advisory locks, by operation and result.",
		}, []string{"op", "result"}),
		losses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgadvisory_leases_lost_total",
			Help: "Leases whose heartbeat found the lock gone.",
		}),
	}
	reg.MustRegister(m.acquisitions, m.wait, m.releases, m.losses)
	return m
}

func (m *metrics) ObserveAcquire(_ context.Context, a advisory.Acquisition) {
	m.acquisitions.WithLabelValues(a.Op, a.Outcome.String()).Inc()
	m.wait.WithLabelValues(a.Op).Observe(a.Wait.Seconds())
}

func (m *metrics) ObserveRelease(_ context.Context, r advisory.Release) {
	result := "ok"
	if r.Err != nil {
		result = "error"
	}
	m.releases.WithLabelValues(r.Op, result).Inc()
}

func (m *metrics) ObserveLoss(context.Context, advisory.Loss) { m.losses.Inc() }
