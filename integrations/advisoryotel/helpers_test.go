package advisoryotel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgadvisory/pgadvisory/integrations/advisoryotel"
)

// harness is an Observer recording into an in-memory span recorder and a
// manual metric reader.
type harness struct {
	obs    *advisoryotel.Observer
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
}

// newHarness returns a harness whose Observer is made with opts after
// the providers' options.
func newHarness(t *testing.T, opts ...advisoryotel.Option) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs, err := advisoryotel.New(append([]advisoryotel.Option{
		advisoryotel.WithTracerProvider(h.tp), advisoryotel.WithMeterProvider(mp),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	return h
}

// caller starts the span of the code that takes a lock, with a tracer of
// the test's own, and returns its context.
func (h *harness) caller(ctx context.Context) (context.Context, trace.Span) {
	return h.tp.Tracer("test").Start(ctx, "caller")
}

// ended returns the ended spans named name.
func (h *harness) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// oneSpan returns the one ended span named name, and fails t unless there
// is exactly one.
func (h *harness) oneSpan(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	s := h.ended(name)
	if len(s) != 1 {
		t.Fatalf("%d ended spans named %q; want 1", len(s), name)
	}
	return s[0]
}

// metrics collects the observer's metrics, by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != advisoryotel.ScopeName {
			t.Errorf("metrics of scope %q; want only %q", sm.Scope.Name, advisoryotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// counts returns a counter's values by the attribute set, encoded as
// attrString writes it; an instrument with no data counts nothing.
func (h *harness) counts(t *testing.T, name string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, ok := h.metrics(t)[name]
	if !ok {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T; want an int64 sum", name, m.Data)
	}
	if !sum.IsMonotonic {
		t.Errorf("%s is not monotonic; want a counter", name)
	}
	for _, dp := range sum.DataPoints {
		out[attrString(dp.Attributes)] += dp.Value
	}
	return out
}

// histSample is what a histogram's data point says: how many values,
// their sum, and the least and greatest.
type histSample struct {
	Count    uint64
	Sum      float64
	Min, Max float64
}

// histograms returns a histogram's points by the attribute set, encoded
// as attrString writes it.
func (h *harness) histograms(t *testing.T, name string) map[string]histSample {
	t.Helper()
	out := map[string]histSample{}
	m, ok := h.metrics(t)[name]
	if !ok {
		return out
	}
	hist, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T; want a float64 histogram", name, m.Data)
	}
	if m.Unit != "s" {
		t.Errorf("%s has unit %q; want s", name, m.Unit)
	}
	for _, dp := range hist.DataPoints {
		s := histSample{Count: dp.Count, Sum: dp.Sum}
		s.Min, _ = dp.Min.Value()
		s.Max, _ = dp.Max.Value()
		out[attrString(dp.Attributes)] = s
	}
	return out
}

// total returns the count and sum of every point of a histogram.
func total(points map[string]histSample) histSample {
	var s histSample
	for _, p := range points {
		s.Count += p.Count
		s.Sum += p.Sum
	}
	return s
}

// attrString writes an attribute set as "k=v,k=v", sorted by key, as
// attribute.Set keeps it.
func attrString(s attribute.Set) string {
	return s.Encoded(attribute.DefaultEncoder())
}

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// requireAttrs fails t unless got has each of want's attributes, with
// want's value.
func requireAttrs(t *testing.T, what string, got map[attribute.Key]attribute.Value, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		v, ok := got[kv.Key]
		if !ok {
			t.Errorf("%s has no attribute %s; want %s", what, kv.Key, kv.Value.String())
			continue
		}
		if v != kv.Value {
			t.Errorf("%s: %s = %s; want %s", what, kv.Key, v.String(), kv.Value.String())
		}
	}
}

// requireNoAttrs fails t if got has any of keys.
func requireNoAttrs(t *testing.T, what string, got map[attribute.Key]attribute.Value, keys ...attribute.Key) {
	t.Helper()
	for _, k := range keys {
		if v, ok := got[k]; ok {
			t.Errorf("%s: %s = %s; want no such attribute", what, k, v.String())
		}
	}
}

// requireChildOf fails t unless s is a child of parent.
func requireChildOf(t *testing.T, s sdktrace.ReadOnlySpan, parent trace.Span) {
	t.Helper()
	p := parent.SpanContext()
	if s.Parent().TraceID() != p.TraceID() || s.Parent().SpanID() != p.SpanID() {
		t.Errorf("span %q has parent %s/%s; want the caller's %s/%s",
			s.Name(), s.Parent().TraceID(), s.Parent().SpanID(), p.TraceID(), p.SpanID())
	}
}

// clock is a time that a test moves on by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// newClock returns a clock at a fixed time, set as o's.
func newClock(o *advisoryotel.Observer) *clock {
	c := &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	advisoryotel.SetClock(o, c.now)
	return c
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// advance moves the clock on by d.
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sqlStateError is a driver's error with a SQLSTATE, as *pq.Error and
// *pgconn.PgError are.
type sqlStateError struct{ code string }

func (e *sqlStateError) Error() string    { return "server error " + e.code }
func (e *sqlStateError) SQLState() string { return e.code }
