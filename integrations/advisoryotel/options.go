package advisoryotel

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// An Option changes what an [Observer] records and where.
type Option func(*options)

// options holds what the Options of [New] set.
type options struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	registry       *keyspace.Registry
	maxTracked     int
}

// DefaultMaxTracked is how many acquisitions of each level, session and
// transaction, an [Observer] tracks for the hold duration when
// [MaxTracked] does not say.
const DefaultMaxTracked = 10000

// WithTracerProvider makes the observer start its spans with a tracer
// from tp. Without it, or with nil, it uses the global provider,
// otel.GetTracerProvider, as it is when [New] runs (the global provider
// forwards to one set later with otel.SetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithMeterProvider makes the observer create its instruments with a
// meter from mp. Without it, or with nil, it uses the global provider,
// otel.GetMeterProvider, as it is when [New] runs.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// WithRegistry makes the observer name the namespace of each pair key
// from r, in the attribute pgadvisory.lock.namespace. r is read at each
// observation, so namespaces registered later are named from then on.
// Without it, or with nil, only the library's own namespace, "pgadvisory",
// is named. A bigint key, and a pair whose namespace r does not name, get
// no namespace attribute.
func WithRegistry(r *keyspace.Registry) Option {
	return func(o *options) { o.registry = r }
}

// MaxTracked bounds how many acquisitions the observer remembers, of each
// level (session and transaction), to measure how long each lock was held
// (default [DefaultMaxTracked]). Past n, the oldest acquisition of the
// level is forgotten, and its release records no hold duration. n = 0
// turns the hold duration off; a negative n makes [New] fail.
func MaxTracked(n int) Option {
	return func(o *options) { o.maxTracked = n }
}
