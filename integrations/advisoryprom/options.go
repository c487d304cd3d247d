package advisoryprom

import (
	"time"

	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// An Option changes what a [Collector] reports and how it reads it.
type Option func(*options)

// options holds what the Options of [NewCollector] set.
type options struct {
	registry *keyspace.Registry
	timeout  time.Duration
	onError  func(error)
}

// defaultTimeout bounds a scrape's query when no [Timeout] is given: less
// than Prometheus's default scrape timeout of 10s.
const defaultTimeout = 5 * time.Second

// WithRegistry makes the collector label each pair key's locks with the
// name of its namespace in r. The registry is read at every scrape, so
// namespaces registered later are named from then on. Without it only the
// library's own namespace, "pgadvisory", is named.
func WithRegistry(r *keyspace.Registry) Option {
	return func(o *options) { o.registry = r }
}

// Timeout bounds each scrape's query (default 5s). A query that runs out
// is cancelled, and the scrape reports pgadvisory_up 0. NewCollector
// panics if d is not positive.
func Timeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// OnError makes the collector call f with the error of every failed
// scrape, from the goroutine that collects. The scrape itself reports
// pgadvisory_up 0 either way.
func OnError(f func(error)) Option {
	return func(o *options) { o.onError = f }
}
