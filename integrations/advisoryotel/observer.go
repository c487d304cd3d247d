package advisoryotel

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// ScopeName is the instrumentation scope of the observer's tracer and
// meter: this module's path.
const ScopeName = "github.com/pgadvisory/pgadvisory/integrations/advisoryotel"

// The names of the spans and span events an [Observer] records. They are
// fixed: keys go into attributes, never into names.
const (
	// AcquireSpan is the span of one acquisition, a child of the span in
	// the caller's context, from sending the lock statement to its
	// answer.
	AcquireSpan = "pgadvisory.acquire"
	// LossSpan is a span of no length, at the moment a lease's loss was
	// detected, a child of the span in the lease's context (the one
	// that was current when the lease was acquired).
	LossSpan = "pgadvisory.loss"
	// ReleaseEvent is the event a release adds to the span in its
	// context, if that span is recording.
	ReleaseEvent = "pgadvisory.release"
)

// The names of the instruments an [Observer] records with.
const (
	// WaitDurationMetric is a histogram, in seconds, of each
	// acquisition's wait: from sending the lock statement to its
	// answer, whatever the outcome.
	WaitDurationMetric = "pgadvisory.lock.wait.duration"
	// HoldDurationMetric is a histogram, in seconds, of how long each
	// lock was held: from the answer that granted it to the answer
	// that released it cleanly (see the package doc for what it
	// misses).
	HoldDurationMetric = "pgadvisory.lock.hold.duration"
	// AcquisitionsMetric counts acquisitions, by outcome.
	AcquisitionsMetric = "pgadvisory.lock.acquisitions"
	// LostMetric counts leases lost.
	LostMetric = "pgadvisory.lease.lost"
)

// waitBuckets and holdBuckets are the histograms' bucket boundaries, in
// seconds: a free key answers in well under a millisecond, a wait may
// last a minute, and a lease may be held for an hour.
var (
	waitBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600}
)

// An Observer records what pgadvisory's locks do through OpenTelemetry:
// a span per acquisition, metrics of waits, holds, outcomes and lost
// leases, and an event per release on the caller's span. Install it for
// every lock operation with advisory.SetObserver, or for one scoped
// helper or lease with advisory.WithObserver. Its methods are quick and
// safe for concurrent use.
type Observer struct {
	tracer       trace.Tracer
	registry     *keyspace.Registry
	wait, hold   metric.Float64Histogram
	acquisitions metric.Int64Counter
	lost         metric.Int64Counter
	holds        *holds
	now          func() time.Time
	// sets caches the metrics' attribute sets by setKey: few, since
	// their values are.
	setsMu sync.RWMutex
	sets   map[setKey]attribute.Set
}

// setKind is the instrument a metric attribute set is for.
type setKind uint8

const (
	acquireSet setKind = iota // namespace, mode, level and outcome
	holdSet                   // namespace, mode and level
	lossSet                   // namespace
)

// setKey names a metric attribute set; namespace is "" for none.
type setKey struct {
	kind         setKind
	namespace    string
	shared, xact bool
	outcome      advisory.Outcome
}

// metricSet returns the attribute set that k names, made once: the
// values are few, so the sets are.
func (o *Observer) metricSet(k setKey) attribute.Set {
	o.setsMu.RLock()
	s, ok := o.sets[k]
	o.setsMu.RUnlock()
	if ok {
		return s
	}
	kvs := make([]attribute.KeyValue, 0, 4)
	if k.namespace != "" {
		kvs = append(kvs, NamespaceAttr.String(k.namespace))
	}
	if k.kind != lossSet {
		kvs = append(kvs, mode(k.shared), level(k.xact))
	}
	if k.kind == acquireSet {
		kvs = append(kvs, OutcomeAttr.String(k.outcome.String()))
	}
	s = attribute.NewSet(kvs...)
	o.setsMu.Lock()
	defer o.setsMu.Unlock()
	o.sets[k] = s
	return s
}

var _ advisory.Observer = (*Observer)(nil)

// New returns an Observer that records with the providers of
// [WithTracerProvider] and [WithMeterProvider], the global ones unless
// they say otherwise. It fails when an instrument cannot be created, or
// when an option's value is out of range.
func New(opts ...Option) (*Observer, error) {
	o := options{maxTracked: DefaultMaxTracked}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxTracked < 0 {
		return nil, fmt.Errorf("advisoryotel: MaxTracked(%d): must not be negative", o.maxTracked)
	}
	if o.tracerProvider == nil {
		o.tracerProvider = otel.GetTracerProvider()
	}
	if o.meterProvider == nil {
		o.meterProvider = otel.GetMeterProvider()
	}
	if o.registry == nil {
		// An empty registry names the library's own namespace.
		o.registry = new(keyspace.Registry)
	}
	v := version()
	obs := &Observer{
		tracer: o.tracerProvider.Tracer(ScopeName,
			trace.WithInstrumentationVersion(v), trace.WithSchemaURL(semconv.SchemaURL)),
		registry: o.registry,
		holds:    newHolds(o.maxTracked),
		now:      time.Now,
		sets:     make(map[setKey]attribute.Set),
	}
	meter := o.meterProvider.Meter(ScopeName,
		metric.WithInstrumentationVersion(v), metric.WithSchemaURL(semconv.SchemaURL))
	var err, e error
	obs.wait, e = meter.Float64Histogram(WaitDurationMetric, metric.WithUnit("s"),
		metric.WithDescription("How long each advisory lock acquisition waited for the server's answer."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	err = errors.Join(err, e)
	obs.hold, e = meter.Float64Histogram(HoldDurationMetric, metric.WithUnit("s"),
		metric.WithDescription("How long each advisory lock was held, from its grant to its clean release."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	err = errors.Join(err, e)
	obs.acquisitions, e = meter.Int64Counter(AcquisitionsMetric, metric.WithUnit("{acquisition}"),
		metric.WithDescription("Advisory lock acquisitions, by outcome."))
	err = errors.Join(err, e)
	obs.lost, e = meter.Int64Counter(LostMetric, metric.WithUnit("{lease}"),
		metric.WithDescription("Advisory lock leases lost."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, fmt.Errorf("advisoryotel: create instruments: %w", err)
	}
	return obs, nil
}

// version returns this module's version in the running program's build
// information, or "" when it has none, as in its own tests.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == ScopeName {
			return m.Version
		}
	}
	return ""
}

// ObserveAcquire records a's wait and outcome, and a span, a child of
// ctx's, that starts a.Wait before now and ends now. A Failed or
// Deadlocked outcome sets the span's status to Error and records a.Err;
// a Busy or TimedOut one is an answer, not an error. An acquired lock is
// remembered for the hold duration.
func (o *Observer) ObserveAcquire(ctx context.Context, a advisory.Acquisition) {
	end := o.now()
	if a.Outcome == advisory.Acquired {
		o.holds.acquired(a.Keys, a.Xact, a.Shared, end)
	}
	ns, hasNS := o.namespaceOf(a.Keys)
	set := metric.WithAttributeSet(o.metricSet(setKey{kind: acquireSet, namespace: ns, shared: a.Shared, xact: a.Xact, outcome: a.Outcome}))
	o.wait.Record(ctx, a.Wait.Seconds(), set)
	o.acquisitions.Add(ctx, 1, set)

	// A sampler sees the system and the operation; the rest is made
	// only for a span that records.
	_, span := o.tracer.Start(ctx, AcquireSpan,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(end.Add(-a.Wait)),
		trace.WithAttributes(semconv.DBSystemNamePostgreSQL, semconv.DBOperationName(a.Op)))
	if !span.IsRecording() {
		span.End(trace.WithTimestamp(end))
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = keyAttrs(attrs, a.Keys)
	if hasNS {
		attrs = append(attrs, NamespaceAttr.String(ns))
	}
	attrs = append(attrs, mode(a.Shared), level(a.Xact), OutcomeAttr.String(a.Outcome.String()))
	span.SetAttributes(errAttrs(attrs, a.Err)...)
	if a.Outcome == advisory.Failed || a.Outcome == advisory.Deadlocked {
		err := a.Err
		if err == nil {
			err = errors.New(a.Outcome.String())
		}
		span.RecordError(err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// ObserveRelease records, for each key of a clean release, how long the
// lock was held since its newest remembered acquisition of the same key,
// mode and level, and adds an event to ctx's span if it is recording. A
// release that failed records no hold; it forgets the acquisition, except
// for an error matching advisory.ErrLockLost, whose acquisition the loss
// already forgot.
func (o *Observer) ObserveRelease(ctx context.Context, r advisory.Release) {
	now := o.now()
	shared, known := releaseMode(r.Op)
	xact := releaseXact(r.Op)
	lost := errors.Is(r.Err, advisory.ErrLockLost)
	for _, k := range r.Keys {
		if lost {
			break
		}
		acq, ok := o.holds.released(k, xact, shared, known)
		if !ok {
			continue
		}
		if len(r.Keys) == 1 {
			shared, known = acq.hk.shared, true
		}
		if r.Err != nil {
			continue
		}
		ns, _ := o.namespaceOf([]advisory.Key{k})
		set := o.metricSet(setKey{kind: holdSet, namespace: ns, shared: acq.hk.shared, xact: xact})
		o.hold.Record(ctx, now.Sub(acq.at).Seconds(), metric.WithAttributeSet(set))
	}

	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, semconv.DBSystemNamePostgreSQL, semconv.DBOperationName(r.Op))
	attrs = keyAttrs(attrs, r.Keys)
	if ns, ok := o.namespaceOf(r.Keys); ok {
		attrs = append(attrs, NamespaceAttr.String(ns))
	}
	if known {
		attrs = append(attrs, mode(shared))
	}
	attrs = append(attrs, level(xact))
	attrs = errAttrs(attrs, r.Err)
	span.AddEvent(ReleaseEvent, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
}

// ObserveLoss counts the lost lease, records a [LossSpan] with status
// Error and l.Cause, a child of ctx's span, and forgets the lease's
// acquisition.
func (o *Observer) ObserveLoss(ctx context.Context, l advisory.Loss) {
	now := o.now()
	keys := []advisory.Key{l.Key}
	acq, tracked := o.holds.released(l.Key, false, false, false)
	ns, hasNS := o.namespaceOf(keys)
	o.lost.Add(ctx, 1, metric.WithAttributeSet(o.metricSet(setKey{kind: lossSet, namespace: ns})))

	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.DBSystemNamePostgreSQL)
	attrs = keyAttrs(attrs, keys)
	if hasNS {
		attrs = append(attrs, NamespaceAttr.String(ns))
	}
	if tracked {
		attrs = append(attrs, mode(acq.hk.shared))
	}
	attrs = append(attrs, level(false))
	cause := l.Cause
	if cause == nil {
		cause = advisory.ErrLockLost
	}
	attrs = errAttrs(attrs, cause)
	_, span := o.tracer.Start(ctx, LossSpan,
		trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	span.RecordError(cause, trace.WithTimestamp(now))
	span.SetStatus(codes.Error, cause.Error())
	span.End(trace.WithTimestamp(now))
}

// namespaceOf returns the name of the namespace of keys, when the
// registry names one and every key has it.
func (o *Observer) namespaceOf(keys []advisory.Key) (string, bool) {
	name := ""
	for i, k := range keys {
		if !k.IsPair() {
			// Only pair keys belong to a namespace.
			return "", false
		}
		ns, ok := o.registry.Lookup(k)
		if !ok || (i > 0 && ns.Name != name) {
			return "", false
		}
		name = ns.Name
	}
	return name, name != ""
}
