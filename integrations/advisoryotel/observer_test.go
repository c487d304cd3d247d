package advisoryotel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/integrations/advisoryotel"
)

// lockErr is an acquisition's error that wraps a driver's, as the
// library's errors do.
func lockErr(sentinel error, code string) error {
	return fmt.Errorf("%w: %w", sentinel, &sqlStateError{code})
}

// TestObserveAcquireSpan calls ObserveAcquire with each outcome and checks
// the span: its name, kind, parent, timestamps (it ends at the observer's
// now and starts Wait before), attributes, and status, Error with the
// error recorded only for Failed and Deadlocked.
func TestObserveAcquireSpan(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		a       advisory.Acquisition
		status  codes.Code
		outcome string
		code    string // db.response.status_code, "" for none
		errType string // error.type, "" for none
	}{
		{"Acquired", advisory.Acquisition{Op: "lock", Wait: 3 * time.Millisecond, Outcome: advisory.Acquired},
			codes.Unset, "acquired", "", ""},
		{"Busy", advisory.Acquisition{Op: "try lock shared", Shared: true, Wait: time.Millisecond, Outcome: advisory.Busy},
			codes.Unset, "busy", "", ""},
		{"TimedOut", advisory.Acquisition{Op: "xact lock", Xact: true, Wait: 250 * time.Millisecond, Outcome: advisory.TimedOut,
			Err: lockErr(advisory.ErrLockTimeout, "55P03")},
			codes.Unset, "timeout", "55P03", "55P03"},
		{"Deadlocked", advisory.Acquisition{Op: "xact lock shared", Xact: true, Shared: true, Wait: 1100 * time.Millisecond,
			Outcome: advisory.Deadlocked, Err: lockErr(advisory.ErrDeadlock, "40P01")},
			codes.Error, "deadlock", "40P01", "40P01"},
		{"Failed", advisory.Acquisition{Op: "lock", Wait: 2 * time.Second, Outcome: advisory.Failed,
			Err: fmt.Errorf("advisory: lock 42: %w", context.Canceled)},
			codes.Error, "error", "", "context.Canceled"},
		{"FailedOther", advisory.Acquisition{Op: "lock", Wait: time.Second, Outcome: advisory.Failed,
			Err: fmt.Errorf("advisory: lock 42: %w", &net.OpError{Op: "read", Err: errors.New("reset")})},
			codes.Error, "error", "", "*net.OpError"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			clk := newClock(h.obs)
			ctx, parent := h.caller(context.Background())
			c.a.Keys = []advisory.Key{advisory.Int64Key(42)}
			h.obs.ObserveAcquire(ctx, c.a)
			parent.End()

			s := h.oneSpan(t, advisoryotel.AcquireSpan)
			requireChildOf(t, s, parent)
			if s.SpanKind() != trace.SpanKindClient {
				t.Errorf("span kind %v; want client", s.SpanKind())
			}
			if !s.EndTime().Equal(clk.now()) || !s.StartTime().Equal(clk.now().Add(-c.a.Wait)) {
				t.Errorf("span from %v to %v; want from %v to %v", s.StartTime(), s.EndTime(), clk.now().Add(-c.a.Wait), clk.now())
			}
			if got := s.EndTime().Sub(s.StartTime()); got != c.a.Wait {
				t.Errorf("span lasts %v; want Wait, %v", got, c.a.Wait)
			}
			mode, level := "exclusive", "session"
			if c.a.Shared {
				mode = "shared"
			}
			if c.a.Xact {
				level = "transaction"
			}
			got := attrs(s)
			requireAttrs(t, "span", got,
				attribute.String("db.system.name", "postgresql"),
				attribute.String("db.operation.name", c.a.Op),
				advisoryotel.KeyAttr.String("42"),
				advisoryotel.ModeAttr.String(mode),
				advisoryotel.LevelAttr.String(level),
				advisoryotel.OutcomeAttr.String(c.outcome))
			requireNoAttrs(t, "span", got, advisoryotel.KeysAttr, advisoryotel.NamespaceAttr)
			if c.code != "" {
				requireAttrs(t, "span", got, attribute.String("db.response.status_code", c.code))
			} else {
				requireNoAttrs(t, "span", got, "db.response.status_code")
			}
			if c.errType != "" {
				requireAttrs(t, "span", got, attribute.String("error.type", c.errType))
			} else {
				requireNoAttrs(t, "span", got, "error.type")
			}
			if s.Status().Code != c.status {
				t.Errorf("status %v; want %v", s.Status().Code, c.status)
			}
			exceptions := 0
			for _, e := range s.Events() {
				if e.Name == "exception" {
					exceptions++
					if !e.Time.Equal(clk.now()) {
						t.Errorf("exception at %v; want %v", e.Time, clk.now())
					}
				}
			}
			if want := map[bool]int{true: 1, false: 0}[c.status == codes.Error]; exceptions != want {
				t.Errorf("%d exception events; want %d", exceptions, want)
			}
			if c.status == codes.Error && s.Status().Description != c.a.Err.Error() {
				t.Errorf("status description %q; want the error, %q", s.Status().Description, c.a.Err.Error())
			}
		})
	}
}

// TestObserveAcquireMetrics calls ObserveAcquire with a mix of outcomes,
// modes and levels, and checks the counter by outcome and the wait
// histogram's counts and sums.
func TestObserveAcquireMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	k := []advisory.Key{advisory.Int64Key(1)}
	for range 3 {
		h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "lock", Keys: k, Wait: 100 * time.Millisecond, Outcome: advisory.Acquired})
	}
	h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "try lock", Keys: k, Wait: 250 * time.Millisecond, Outcome: advisory.Busy})
	h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "try lock", Keys: k, Wait: 750 * time.Millisecond, Outcome: advisory.Busy})
	h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "xact lock shared", Keys: k, Xact: true, Shared: true,
		Wait: 2 * time.Second, Outcome: advisory.TimedOut, Err: advisory.ErrLockTimeout})

	const (
		acquired = "pgadvisory.lock.level=session,pgadvisory.lock.mode=exclusive,pgadvisory.lock.outcome=acquired"
		busy     = "pgadvisory.lock.level=session,pgadvisory.lock.mode=exclusive,pgadvisory.lock.outcome=busy"
		timeout  = "pgadvisory.lock.level=transaction,pgadvisory.lock.mode=shared,pgadvisory.lock.outcome=timeout"
	)
	wantCounts := map[string]int64{acquired: 3, busy: 2, timeout: 1}
	if got := h.counts(t, advisoryotel.AcquisitionsMetric); !equalMaps(got, wantCounts) {
		t.Errorf("%s = %v; want %v", advisoryotel.AcquisitionsMetric, got, wantCounts)
	}
	wantWaits := map[string]histSample{acquired: {3, 0.3, 0.1, 0.1}, busy: {2, 1, 0.25, 0.75}, timeout: {1, 2, 2, 2}}
	got := h.histograms(t, advisoryotel.WaitDurationMetric)
	if len(got) != len(wantWaits) {
		t.Errorf("%s = %v; want %v", advisoryotel.WaitDurationMetric, got, wantWaits)
	}
	for a, w := range wantWaits {
		if g := got[a]; g.Count != w.Count || !near(g.Sum, w.Sum) || !near(g.Min, w.Min) || !near(g.Max, w.Max) {
			t.Errorf("%s{%s} = %+v; want %+v", advisoryotel.WaitDurationMetric, a, g, w)
		}
	}
	if got := h.counts(t, advisoryotel.LostMetric); len(got) != 0 {
		t.Errorf("%s = %v; want nothing", advisoryotel.LostMetric, got)
	}
}

// equalMaps reports whether a and b hold the same entries.
func equalMaps[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// near reports whether two sums of seconds agree to a microsecond.
func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// TestObserveAcquireSeveralKeys checks that a call on several keys names
// them all, in order, in pgadvisory.lock.keys and none in
// pgadvisory.lock.key, and has a namespace only when they share one.
func TestObserveAcquireSeveralKeys(t *testing.T) {
	t.Parallel()
	reg := new(keyspace.Registry)
	billing := reg.MustRegister(advisory.Namespace{ID: 7, Name: "billing"})
	reg.MustRegister(advisory.Namespace{ID: 8, Name: "search"})
	cases := []struct {
		name      string
		keys      []advisory.Key
		namespace string // "" for none
	}{
		{"OneNamespace", []advisory.Key{billing.Key(2), billing.Key(1)}, "billing"},
		{"TwoNamespaces", []advisory.Key{billing.Key(1), advisory.PairKey(8, 1)}, ""},
		{"Unregistered", []advisory.Key{billing.Key(1), advisory.PairKey(9, 1)}, ""},
		{"Bigint", []advisory.Key{advisory.Int64Key(5), advisory.Int64Key(6)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, advisoryotel.WithRegistry(reg))
			h.obs.ObserveAcquire(context.Background(), advisory.Acquisition{Op: "lock", Keys: c.keys, Outcome: advisory.Acquired})
			got := attrs(h.oneSpan(t, advisoryotel.AcquireSpan))
			want := make([]string, len(c.keys))
			for i, k := range c.keys {
				want[i] = k.String()
			}
			requireAttrs(t, "span", got, advisoryotel.KeysAttr.StringSlice(want))
			requireNoAttrs(t, "span", got, advisoryotel.KeyAttr)
			if c.namespace != "" {
				requireAttrs(t, "span", got, advisoryotel.NamespaceAttr.String(c.namespace))
			} else {
				requireNoAttrs(t, "span", got, advisoryotel.NamespaceAttr)
			}
		})
	}
}

// TestNamespace checks the namespace attribute of a span and of the
// metrics: named from the registry of WithRegistry, the library's own
// named without one, and absent for a bigint key and an unregistered
// pair.
func TestNamespace(t *testing.T) {
	t.Parallel()
	reg := new(keyspace.Registry)
	billing := reg.MustRegister(advisory.Namespace{ID: 7, Name: "billing"})
	cases := []struct {
		name      string
		registry  *keyspace.Registry
		key       advisory.Key
		namespace string // "" for none
	}{
		{"Registered", reg, billing.NameKey("nightly"), "billing"},
		{"Unregistered", reg, advisory.PairKey(9, 1), ""},
		{"Bigint", reg, advisory.Int64Key(7), ""},
		{"LibraryWithoutRegistry", nil, advisory.PairKey(keyspace.ReservedMinID, 1), "pgadvisory"},
		{"RegisteredElsewhere", nil, billing.Key(1), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, advisoryotel.WithRegistry(c.registry))
			ctx := context.Background()
			h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "lock", Keys: []advisory.Key{c.key}, Outcome: advisory.Acquired})
			h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: []advisory.Key{c.key}})
			h.obs.ObserveLoss(ctx, advisory.Loss{Key: c.key, Cause: errors.New("terminated")})
			for _, name := range []string{advisoryotel.AcquireSpan, advisoryotel.LossSpan} {
				got := attrs(h.oneSpan(t, name))
				if c.namespace != "" {
					requireAttrs(t, name, got, advisoryotel.NamespaceAttr.String(c.namespace))
				} else {
					requireNoAttrs(t, name, got, advisoryotel.NamespaceAttr)
				}
			}
			want := ""
			if c.namespace != "" {
				want = "pgadvisory.lock.namespace=" + c.namespace
			}
			for name := range h.metrics(t) {
				for _, set := range metricSets(t, h, name) {
					v, ok := set.Value(advisoryotel.NamespaceAttr)
					if got := map[bool]string{true: "pgadvisory.lock.namespace=" + v.AsString()}[ok]; got != want {
						t.Errorf("%s{%s}: namespace %q; want %q", name, attrString(set), got, want)
					}
				}
			}
		})
	}
}

// metricSets returns the attribute sets of every data point of the
// metric name, whatever its kind.
func metricSets(t *testing.T, h *harness, name string) []attribute.Set {
	t.Helper()
	var out []attribute.Set
	switch d := h.metrics(t)[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	default:
		t.Fatalf("%s is a %T; want an int64 sum or a float64 histogram", name, d)
	}
	return out
}

// holdStep is one call of a hold test, at the clock's time, which then
// moves on by after.
type holdStep struct {
	call  func(o *advisoryotel.Observer)
	after time.Duration
}

// acq returns a step that observes the acquisition of keys.
func acq(op string, outcome advisory.Outcome, after time.Duration, keys ...advisory.Key) holdStep {
	return holdStep{func(o *advisoryotel.Observer) {
		o.ObserveAcquire(context.Background(), advisory.Acquisition{Op: op, Keys: keys, Outcome: outcome,
			Shared: strings.HasSuffix(op, "shared"), Xact: strings.Contains(op, "xact")})
	}, after}
}

// rel returns a step that observes the release of keys.
func rel(op string, err error, after time.Duration, keys ...advisory.Key) holdStep {
	return holdStep{func(o *advisoryotel.Observer) {
		o.ObserveRelease(context.Background(), advisory.Release{Op: op, Keys: keys, Err: err})
	}, after}
}

// lose returns a step that observes the loss of key's lease.
func lose(key advisory.Key) holdStep {
	return holdStep{func(o *advisoryotel.Observer) {
		o.ObserveLoss(context.Background(), advisory.Loss{Key: key, Cause: errors.New("terminated")})
	}, 0}
}

// TestHoldDuration runs sequences of acquisitions, releases and losses on
// a clock moved by hand, and checks the hold histogram (its count and sum
// per mode and level) and how many grants are left remembered.
func TestHoldDuration(t *testing.T) {
	t.Parallel()
	a, b := advisory.Int64Key(1), advisory.PairKey(1, 2)
	const (
		sessionEx = "pgadvisory.lock.level=session,pgadvisory.lock.mode=exclusive"
		sessionSh = "pgadvisory.lock.level=session,pgadvisory.lock.mode=shared"
		xactEx    = "pgadvisory.lock.level=transaction,pgadvisory.lock.mode=exclusive"
		xactSh    = "pgadvisory.lock.level=transaction,pgadvisory.lock.mode=shared"
	)
	cases := []struct {
		name          string
		steps         []holdStep
		want          map[string]histSample
		session, xact int // grants left remembered
	}{
		{"LockThenUnlock", []holdStep{
			acq("lock", advisory.Acquired, 2*time.Second, a), rel("unlock", nil, 0, a),
		}, map[string]histSample{sessionEx: {1, 2, 2, 2}}, 0, 0},
		{"StackedLastInFirstOut", []holdStep{
			acq("lock", advisory.Acquired, time.Second, a), acq("lock", advisory.Acquired, 2*time.Second, a),
			rel("unlock", nil, 3*time.Second, a), rel("unlock", nil, 0, a),
		}, map[string]histSample{sessionEx: {2, 2 + 6, 2, 6}}, 0, 0},
		{"ModesApart", []holdStep{
			acq("lock", advisory.Acquired, time.Second, a), acq("lock shared", advisory.Acquired, 3*time.Second, a),
			rel("unlock", nil, time.Second, a), rel("unlock shared", nil, 0, a),
		}, map[string]histSample{sessionEx: {1, 4, 4, 4}, sessionSh: {1, 4, 4, 4}}, 0, 0},
		{"XactEndTakesTheNewestMode", []holdStep{
			acq("xact lock shared", advisory.Acquired, 2*time.Second, a), rel("xact end", nil, 0, a),
			acq("xact lock", advisory.Acquired, time.Second, b), rel("xact end", nil, 0, b),
		}, map[string]histSample{xactSh: {1, 2, 2, 2}, xactEx: {1, 1, 1, 1}}, 0, 0},
		{"LevelsApart", []holdStep{
			acq("lock", advisory.Acquired, time.Second, a), rel("xact end", nil, 0, a),
			acq("xact lock", advisory.Acquired, time.Second, b), rel("unlock", nil, 0, b),
		}, map[string]histSample{}, 1, 1},
		{"PlainXactLockUnseen", []holdStep{
			acq("try xact lock", advisory.Acquired, time.Second, a),
		}, map[string]histSample{}, 0, 1},
		{"OnlyGrantsCount", []holdStep{
			acq("try lock", advisory.Busy, 0, a), acq("lock", advisory.TimedOut, 0, a),
			acq("lock", advisory.Deadlocked, 0, a), acq("lock", advisory.Failed, 0, a),
			rel("unlock", nil, 0, a),
		}, map[string]histSample{}, 0, 0},
		{"FailedReleaseForgets", []holdStep{
			acq("lock", advisory.Acquired, time.Second, a), rel("unlock", advisory.ErrNotHeld, 0, a),
			rel("unlock", nil, 0, a),
		}, map[string]histSample{}, 0, 0},
		{"LostReleaseKeeps", []holdStep{
			acq("lock", advisory.Acquired, time.Second, a), rel("unlock", fmt.Errorf("advisory: unlock 1: %w", advisory.ErrLockLost), 0, a),
		}, map[string]histSample{}, 1, 0},
		{"LossForgets", []holdStep{
			acq("lock shared", advisory.Acquired, time.Second, a), lose(a),
			rel("unlock shared", advisory.ErrLockLost, 0, a),
		}, map[string]histSample{}, 0, 0},
		{"LossForgetsOneOfTwo", []holdStep{
			acq("lock", advisory.Acquired, time.Second, a), acq("lock", advisory.Acquired, time.Second, a), lose(a),
			rel("unlock", nil, 0, a),
		}, map[string]histSample{sessionEx: {1, 2, 2, 2}}, 0, 0},
		{"SeveralKeys", []holdStep{
			acq("lock", advisory.Acquired, time.Second, a, b), rel("unlock", nil, 0, a, b),
		}, map[string]histSample{sessionEx: {2, 2, 1, 1}}, 0, 0},
		{"ReleaseWithoutGrant", []holdStep{
			rel("unlock", nil, 0, a), rel("xact end", nil, 0, a),
		}, map[string]histSample{}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			clk := newClock(h.obs)
			for _, s := range c.steps {
				s.call(h.obs)
				clk.advance(s.after)
			}
			got := h.histograms(t, advisoryotel.HoldDurationMetric)
			if len(got) != len(c.want) {
				t.Errorf("%s = %v; want %v", advisoryotel.HoldDurationMetric, got, c.want)
			}
			for k, w := range c.want {
				if g := got[k]; g.Count != w.Count || !near(g.Sum, w.Sum) || !near(g.Min, w.Min) || !near(g.Max, w.Max) {
					t.Errorf("%s{%s} = %+v; want %+v", advisoryotel.HoldDurationMetric, k, g, w)
				}
			}
			if s, x := advisoryotel.Tracked(h.obs); s != c.session || x != c.xact {
				t.Errorf("%d session and %d transaction grants remembered; want %d and %d", s, x, c.session, c.xact)
			}
		})
	}
}

// TestMaxTracked checks the bound on remembered grants: past it the
// oldest of the level is forgotten and its release records no hold, the
// levels are bounded apart, 0 turns holds off, and a negative bound is
// refused.
func TestMaxTracked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := func(i int64) []advisory.Key { return []advisory.Key{advisory.Int64Key(i)} }
	grant := func(o *advisoryotel.Observer, op string, i int64) {
		o.ObserveAcquire(ctx, advisory.Acquisition{Op: op, Keys: k(i), Xact: strings.Contains(op, "xact"), Outcome: advisory.Acquired})
	}

	t.Run("OldestForgotten", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, advisoryotel.MaxTracked(2))
		for i := range int64(3) {
			grant(h.obs, "lock", i)
		}
		if s, _ := advisoryotel.Tracked(h.obs); s != 2 {
			t.Fatalf("%d grants remembered; want the bound, 2", s)
		}
		for i := range int64(3) {
			h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: k(i)})
		}
		if got := total(h.histograms(t, advisoryotel.HoldDurationMetric)); got.Count != 2 {
			t.Errorf("%d holds recorded; want 2: the first grant was forgotten", got.Count)
		}
	})
	t.Run("OldestOfAStackForgotten", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, advisoryotel.MaxTracked(2))
		clk := newClock(h.obs)
		grant(h.obs, "lock", 1)
		clk.advance(time.Second)
		grant(h.obs, "lock", 1)
		clk.advance(time.Second)
		grant(h.obs, "lock", 2)
		clk.advance(time.Second)
		h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: k(1)})
		h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: k(1)})
		if got := total(h.histograms(t, advisoryotel.HoldDurationMetric)); got.Count != 1 || !near(got.Sum, 2) {
			t.Errorf("holds %+v; want one of 2s, the second grant's", got)
		}
	})
	t.Run("LevelsBoundedApart", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, advisoryotel.MaxTracked(1))
		grant(h.obs, "lock", 1)
		for i := range int64(5) {
			grant(h.obs, "xact lock", 10+i)
		}
		if s, x := advisoryotel.Tracked(h.obs); s != 1 || x != 1 {
			t.Fatalf("%d session and %d transaction grants remembered; want 1 and 1", s, x)
		}
		h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: k(1)})
		if got := total(h.histograms(t, advisoryotel.HoldDurationMetric)); got.Count != 1 {
			t.Errorf("%d holds recorded; want the session lock's, 1", got.Count)
		}
	})
	t.Run("Zero", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, advisoryotel.MaxTracked(0))
		grant(h.obs, "lock", 1)
		h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: k(1)})
		if s, x := advisoryotel.Tracked(h.obs); s != 0 || x != 0 {
			t.Errorf("%d and %d grants remembered; want none", s, x)
		}
		if got := total(h.histograms(t, advisoryotel.HoldDurationMetric)); got.Count != 0 {
			t.Errorf("%d holds recorded; want none", got.Count)
		}
		if got := h.counts(t, advisoryotel.AcquisitionsMetric); len(got) != 1 {
			t.Errorf("%s = %v; want the one acquisition", advisoryotel.AcquisitionsMetric, got)
		}
	})
	t.Run("Negative", func(t *testing.T) {
		t.Parallel()
		_, err := advisoryotel.New(advisoryotel.MaxTracked(-1))
		if err == nil || !strings.HasPrefix(err.Error(), "advisoryotel: ") {
			t.Errorf("New(MaxTracked(-1)) = %v; want an error prefixed advisoryotel:", err)
		}
	})
}

// TestObserveRelease checks the event a release adds to a recording span
// in its context, and that a context without one is left alone.
func TestObserveRelease(t *testing.T) {
	t.Parallel()
	reg := new(keyspace.Registry)
	billing := reg.MustRegister(advisory.Namespace{ID: 7, Name: "billing"})
	key := billing.Key(3)
	cases := []struct {
		name  string
		grant string // the acquisition's op before the release, "" for none
		r     advisory.Release
		want  []attribute.KeyValue
		none  []attribute.Key
	}{
		{"Unlock", "lock", advisory.Release{Op: "unlock", Keys: []advisory.Key{key}},
			[]attribute.KeyValue{attribute.String("db.operation.name", "unlock"), advisoryotel.ModeAttr.String("exclusive"),
				advisoryotel.LevelAttr.String("session"), advisoryotel.NamespaceAttr.String("billing"), advisoryotel.KeyAttr.String("7:3")},
			[]attribute.Key{"error.type", advisoryotel.OutcomeAttr}},
		{"XactEndModeFromGrant", "xact lock shared", advisory.Release{Op: "xact end", Keys: []advisory.Key{key}},
			[]attribute.KeyValue{advisoryotel.ModeAttr.String("shared"), advisoryotel.LevelAttr.String("transaction")}, nil},
		{"XactEndUnknownMode", "", advisory.Release{Op: "xact end", Keys: []advisory.Key{key}},
			[]attribute.KeyValue{advisoryotel.LevelAttr.String("transaction")}, []attribute.Key{advisoryotel.ModeAttr}},
		{"Failed", "lock shared", advisory.Release{Op: "unlock shared", Keys: []advisory.Key{key},
			Err: fmt.Errorf("advisory: unlock 7:3: %w", &sqlStateError{"57P01"})},
			[]attribute.KeyValue{advisoryotel.ModeAttr.String("shared"), attribute.String("error.type", "57P01"),
				attribute.String("db.response.status_code", "57P01")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, advisoryotel.WithRegistry(reg))
			clk := newClock(h.obs)
			ctx, parent := h.caller(context.Background())
			if c.grant != "" {
				h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: c.grant, Keys: c.r.Keys, Outcome: advisory.Acquired,
					Shared: strings.HasSuffix(c.grant, "shared"), Xact: strings.Contains(c.grant, "xact")})
			}
			clk.advance(time.Second)
			h.obs.ObserveRelease(ctx, c.r)
			parent.End()
			var events []sdktrace.Event
			for _, s := range h.ended("caller") {
				events = append(events, s.Events()...)
			}
			if len(events) != 1 || events[0].Name != advisoryotel.ReleaseEvent {
				t.Fatalf("caller span's events %v; want one %q", events, advisoryotel.ReleaseEvent)
			}
			if !events[0].Time.Equal(clk.now()) {
				t.Errorf("event at %v; want %v", events[0].Time, clk.now())
			}
			got := map[attribute.Key]attribute.Value{}
			for _, kv := range events[0].Attributes {
				got[kv.Key] = kv.Value
			}
			requireAttrs(t, "event", got, append(c.want, attribute.String("db.system.name", "postgresql"))...)
			requireNoAttrs(t, "event", got, c.none...)
		})
	}

	t.Run("NoSpan", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.obs.ObserveRelease(context.Background(), advisory.Release{Op: "unlock", Keys: []advisory.Key{key}})
		if got := h.spans.Ended(); len(got) != 0 {
			t.Errorf("%d spans; want none", len(got))
		}
	})
}

// TestObserveLoss checks the loss span (a child of the context's span,
// of no length, status Error with the cause recorded) and the lost
// counter by namespace.
func TestObserveLoss(t *testing.T) {
	t.Parallel()
	reg := new(keyspace.Registry)
	billing := reg.MustRegister(advisory.Namespace{ID: 7, Name: "billing"})
	h := newHarness(t, advisoryotel.WithRegistry(reg))
	clk := newClock(h.obs)
	ctx, parent := h.caller(context.Background())
	cause := fmt.Errorf("heartbeat: %w", &sqlStateError{"57P01"})
	h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "lock shared", Keys: []advisory.Key{billing.Key(1)}, Shared: true, Outcome: advisory.Acquired})
	clk.advance(time.Minute)
	h.obs.ObserveLoss(ctx, advisory.Loss{Key: billing.Key(1), Cause: cause})
	h.obs.ObserveLoss(ctx, advisory.Loss{Key: advisory.Int64Key(9), Cause: errors.New("no answer")})
	parent.End()

	losses := h.ended(advisoryotel.LossSpan)
	if len(losses) != 2 {
		t.Fatalf("%d loss spans; want 2", len(losses))
	}
	s := losses[0]
	requireChildOf(t, s, parent)
	if !s.StartTime().Equal(clk.now()) || !s.EndTime().Equal(clk.now()) {
		t.Errorf("loss span from %v to %v; want both at %v", s.StartTime(), s.EndTime(), clk.now())
	}
	if s.Status().Code != codes.Error || s.Status().Description != cause.Error() {
		t.Errorf("status %v %q; want Error %q", s.Status().Code, s.Status().Description, cause.Error())
	}
	if len(s.Events()) != 1 || s.Events()[0].Name != "exception" {
		t.Errorf("events %v; want the cause recorded", s.Events())
	}
	requireAttrs(t, "loss span", attrs(s),
		attribute.String("db.system.name", "postgresql"),
		advisoryotel.KeyAttr.String("7:1"), advisoryotel.NamespaceAttr.String("billing"),
		advisoryotel.ModeAttr.String("shared"), advisoryotel.LevelAttr.String("session"),
		attribute.String("db.response.status_code", "57P01"))
	requireNoAttrs(t, "second loss span", attrs(losses[1]), advisoryotel.ModeAttr, advisoryotel.NamespaceAttr)

	want := map[string]int64{"pgadvisory.lock.namespace=billing": 1, "": 1}
	if got := h.counts(t, advisoryotel.LostMetric); !equalMaps(got, want) {
		t.Errorf("%s = %v; want %v", advisoryotel.LostMetric, got, want)
	}
}

// allowedMetricAttrs are the only attributes a metric may carry.
var allowedMetricAttrs = map[attribute.Key]bool{
	advisoryotel.NamespaceAttr: true, advisoryotel.ModeAttr: true,
	advisoryotel.LevelAttr: true, advisoryotel.OutcomeAttr: true,
}

// TestMetricAttributesNeverNameKeys observes every kind of call on many
// keys, of both key spaces, and checks that no metric data point carries
// a key, or any attribute but namespace, mode, level and outcome, and that
// the number of series does not grow with the number of keys.
func TestMetricAttributesNeverNameKeys(t *testing.T) {
	t.Parallel()
	reg := new(keyspace.Registry)
	billing := reg.MustRegister(advisory.Namespace{ID: 7, Name: "billing"})
	h := newHarness(t, advisoryotel.WithRegistry(reg))
	ctx := context.Background()
	keyStrings := map[string]bool{}
	outcomes := []advisory.Outcome{advisory.Acquired, advisory.Busy, advisory.TimedOut, advisory.Deadlocked, advisory.Failed}
	for i := range 200 {
		keys := []advisory.Key{advisory.Int64Key(int64(1000 + i)), billing.Key(int32(i)), advisory.PairKey(int32(50+i), 3)}
		for j, k := range keys {
			keyStrings[k.String()] = true
			op := []string{"lock", "xact lock shared", "try lock shared"}[j]
			h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: op, Keys: []advisory.Key{k}, Xact: j == 1, Shared: j > 0,
				Outcome: outcomes[i%len(outcomes)], Wait: time.Duration(i) * time.Millisecond})
		}
		h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "lock", Keys: keys, Outcome: advisory.Acquired})
		h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: keys[:1]})
		h.obs.ObserveRelease(ctx, advisory.Release{Op: "xact end", Keys: keys[1:2]})
		h.obs.ObserveRelease(ctx, advisory.Release{Op: "unlock shared", Keys: keys[2:]})
		h.obs.ObserveLoss(ctx, advisory.Loss{Key: keys[i%3], Cause: errors.New("lost")})
	}

	series := 0
	for name := range h.metrics(t) {
		for _, set := range metricSets(t, h, name) {
			series++
			for _, kv := range set.ToSlice() {
				if !allowedMetricAttrs[kv.Key] {
					t.Errorf("%s carries attribute %s=%s; want only namespace, mode, level and outcome", name, kv.Key, kv.Value.String())
				}
				if keyStrings[kv.Value.String()] {
					t.Errorf("%s carries a key: %s=%s", name, kv.Key, kv.Value.String())
				}
			}
		}
	}
	// 3 kinds of key x 5 outcomes, plus the calls on several keys, on two
	// instruments; 3 hold series; 2 lost series: far fewer than keys.
	if series == 0 || series > 40 {
		t.Errorf("%d metric series for %d keys; want a few, bounded by the attributes' values", series, len(keyStrings))
	}
}

// TestDefaultProviders checks that without WithTracerProvider and
// WithMeterProvider the observer records with the global providers, under
// the instrumentation scope of the module's path. It sets the globals, so
// it does not run in parallel.
func TestDefaultProviders(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
	})
	obs, err := advisoryotel.New()
	if err != nil {
		t.Fatal(err)
	}
	obs.ObserveAcquire(context.Background(), advisory.Acquisition{Op: "lock", Keys: []advisory.Key{advisory.Int64Key(1)}, Outcome: advisory.Acquired})
	spans := sr.Ended()
	if len(spans) != 1 || spans[0].Name() != advisoryotel.AcquireSpan {
		t.Fatalf("global tracer provider's spans %v; want one %q", spans, advisoryotel.AcquireSpan)
	}
	if got := spans[0].InstrumentationScope().Name; got != advisoryotel.ScopeName {
		t.Errorf("span scope %q; want %q", got, advisoryotel.ScopeName)
	}
	h := &harness{reader: reader}
	if got := h.counts(t, advisoryotel.AcquisitionsMetric); len(got) != 1 {
		t.Errorf("global meter provider's %s = %v; want one acquisition", advisoryotel.AcquisitionsMetric, got)
	}
}

// TestConcurrentUse observes acquisitions and releases of a few keys from
// many goroutines at once (run it with -race), and checks that every
// grant was paired with its release: as many holds as grants, none left
// remembered.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const goroutines, rounds = 8, 300
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ctx, span := h.caller(context.Background())
			defer span.End()
			for i := range rounds {
				k := []advisory.Key{advisory.Int64Key(int64((g + i) % 5))}
				shared := i%2 == 0
				op, unlock := "lock", "unlock"
				if shared {
					op, unlock = "lock shared", "unlock shared"
				}
				h.obs.ObserveAcquire(ctx, advisory.Acquisition{Op: op, Keys: k, Shared: shared, Outcome: advisory.Acquired})
				h.obs.ObserveRelease(ctx, advisory.Release{Op: unlock, Keys: k})
			}
		})
	}
	wg.Wait()
	if got := total(h.histograms(t, advisoryotel.HoldDurationMetric)); got.Count != goroutines*rounds {
		t.Errorf("%d holds; want %d", got.Count, goroutines*rounds)
	}
	if s, x := advisoryotel.Tracked(h.obs); s != 0 || x != 0 {
		t.Errorf("%d and %d grants left remembered; want none", s, x)
	}
	if got := len(h.ended(advisoryotel.AcquireSpan)); got != goroutines*rounds {
		t.Errorf("%d acquire spans; want %d", got, goroutines*rounds)
	}
}

// TestUnsampled checks that a span the sampler drops costs no more than
// its start, and that the metrics are recorded all the same; the sampler
// sees the system and the operation.
func TestUnsampled(t *testing.T) {
	t.Parallel()
	var seen []attribute.KeyValue
	sampler := samplerFunc(func(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
		seen = p.Attributes
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	})
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, advisoryotel.WithTracerProvider(tp))
	h.obs.ObserveAcquire(context.Background(), advisory.Acquisition{Op: "try lock", Keys: []advisory.Key{advisory.Int64Key(1)}, Outcome: advisory.Busy})
	if got := sr.Ended(); len(got) != 0 {
		t.Errorf("%d spans recorded; want none, the sampler dropped them", len(got))
	}
	want := []attribute.KeyValue{attribute.String("db.system.name", "postgresql"), attribute.String("db.operation.name", "try lock")}
	if len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("the sampler saw %v; want %v", seen, want)
	}
	if got := h.counts(t, advisoryotel.AcquisitionsMetric); len(got) != 1 {
		t.Errorf("%s = %v; want the one acquisition", advisoryotel.AcquisitionsMetric, got)
	}
}

// samplerFunc is a sampler made of a function.
type samplerFunc func(sdktrace.SamplingParameters) sdktrace.SamplingResult

func (f samplerFunc) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult { return f(p) }
func (samplerFunc) Description() string                                                  { return "samplerFunc" }
