package advisoryotel_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/advisoryotel"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the observer on PostgreSQL, on every server and
// driver of pgtest.Each: locks are taken through the library, with the
// observer given by advisory.WithObserver (TestObserverIntegration) or
// advisory.SetObserver (TestSetObserverIntegration), and the spans and
// metrics it recorded are read back from the SDK's span recorder and
// manual reader.

// TestObserverIntegration runs, in a database of each target's own, an
// acquisition and release of each level, a try that finds the key busy,
// a bounded wait that runs out, a deadlock, and a lease lost to
// pg_terminate_backend, each observed by an Observer of its own.
func TestObserverIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		db := pgtest.NewDatabase(t, tg, "advisoryotel").DB
		t.Run("Session", func(t *testing.T) { testSession(t, db) })
		t.Run("Xact", func(t *testing.T) { testXact(t, db) })
		t.Run("Busy", func(t *testing.T) { testBusy(t, db) })
		t.Run("TimedOut", func(t *testing.T) { testTimedOut(t, db) })
		t.Run("Deadlock", func(t *testing.T) { testDeadlock(t, db) })
		t.Run("LeaseLost", func(t *testing.T) { testLeaseLost(t, db) })
	})
}

// acquireSpan returns h's one acquire span, after checking that it is a
// child of the caller's span, lies within [before, after], and lasts as
// long as the wait that the histogram recorded, its only one.
func (h *harness) acquireSpan(t *testing.T, caller sdktrace.ReadOnlySpan, before, after time.Time) sdktrace.ReadOnlySpan {
	t.Helper()
	s := h.oneSpan(t, advisoryotel.AcquireSpan)
	if s.Parent().SpanID() != caller.SpanContext().SpanID() || s.Parent().TraceID() != caller.SpanContext().TraceID() {
		t.Errorf("acquire span's parent %s; want the caller's span %s", s.Parent().SpanID(), caller.SpanContext().SpanID())
	}
	if s.StartTime().Before(before) || s.EndTime().After(after) || s.EndTime().Before(s.StartTime()) {
		t.Errorf("acquire span from %v to %v; want within the call, %v to %v", s.StartTime(), s.EndTime(), before, after)
	}
	w := total(h.histograms(t, advisoryotel.WaitDurationMetric))
	if w.Count != 1 {
		t.Fatalf("%d waits recorded; want 1", w.Count)
	}
	if d := s.EndTime().Sub(s.StartTime()); !near(d.Seconds(), w.Sum) {
		t.Errorf("acquire span lasts %v; want the wait recorded, %vs", d, w.Sum)
	}
	return s
}

// callerSpan returns the ended span of the test's caller.
func (h *harness) callerSpan(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	return h.oneSpan(t, "caller")
}

// releaseEvents returns the release events on s.
func releaseEvents(s sdktrace.ReadOnlySpan) []map[attribute.Key]attribute.Value {
	var out []map[attribute.Key]attribute.Value
	for _, e := range s.Events() {
		if e.Name != advisoryotel.ReleaseEvent {
			continue
		}
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range e.Attributes {
			m[kv.Key] = kv.Value
		}
		out = append(out, m)
	}
	return out
}

// wantCounts fails t unless the counter name holds exactly want, by
// attribute set.
func wantCounts(t *testing.T, h *harness, name string, want map[string]int64) {
	t.Helper()
	if got := h.counts(t, name); !equalMaps(got, want) {
		t.Errorf("%s = %v; want %v", name, got, want)
	}
}

// holdCounts returns how many holds the histogram recorded, by attribute
// set.
func holdCounts(t *testing.T, h *harness) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for k, s := range h.histograms(t, advisoryotel.HoldDurationMetric) {
		out[k] = s.Count
	}
	return out
}

// The attribute sets of the metrics, as attrString writes them.
const (
	sessionExclusive = "pgadvisory.lock.level=session,pgadvisory.lock.mode=exclusive"
	sessionShared    = "pgadvisory.lock.level=session,pgadvisory.lock.mode=shared"
	xactExclusive    = "pgadvisory.lock.level=transaction,pgadvisory.lock.mode=exclusive"
	xactShared       = "pgadvisory.lock.level=transaction,pgadvisory.lock.mode=shared"
)

// testSession takes a session lock with WithSessionLock: one acquire
// span under the caller's, one acquisition, one hold at least as long as
// fn ran and no longer than the call, and a release event on the
// caller's span.
func testSession(t *testing.T, db *sql.DB) {
	h := newHarness(t)
	key := advisory.Int64Key(101)
	ctx, caller := h.caller(context.Background())
	before := time.Now()
	var inFn time.Duration
	err := advisory.WithSessionLock(ctx, db, key, func(ctx context.Context, conn *sql.Conn) error {
		start := time.Now()
		locks, err := pgtest.LocksOf(ctx, db, key)
		if err == nil && (len(locks) != 1 || !locks[0].Granted) {
			err = errors.New("the key is not held")
		}
		inFn = time.Since(start)
		return err
	}, advisory.WithObserver(h.obs))
	after := time.Now()
	caller.End()
	if err != nil {
		t.Fatal(err)
	}

	c := h.callerSpan(t)
	s := h.acquireSpan(t, c, before, after)
	requireAttrs(t, "acquire span", attrs(s),
		attribute.String("db.system.name", "postgresql"),
		attribute.String("db.operation.name", "lock"),
		advisoryotel.KeyAttr.String("101"),
		advisoryotel.ModeAttr.String("exclusive"),
		advisoryotel.LevelAttr.String("session"),
		advisoryotel.OutcomeAttr.String("acquired"))
	if s.Status().Code != codes.Unset {
		t.Errorf("acquire span status %v; want unset", s.Status().Code)
	}
	wantCounts(t, h, advisoryotel.AcquisitionsMetric, map[string]int64{sessionExclusive + ",pgadvisory.lock.outcome=acquired": 1})
	hold := h.histograms(t, advisoryotel.HoldDurationMetric)[sessionExclusive]
	if hold.Count != 1 || hold.Sum < inFn.Seconds() || hold.Sum > after.Sub(before).Seconds() {
		t.Errorf("hold %+v; want one, of at least fn's %v and at most the call's %v", hold, inFn, after.Sub(before))
	}
	ev := releaseEvents(c)
	if len(ev) != 1 {
		t.Fatalf("%d release events on the caller's span; want 1", len(ev))
	}
	requireAttrs(t, "release event", ev[0], attribute.String("db.operation.name", "unlock"), advisoryotel.KeyAttr.String("101"))
	requireNoAttrs(t, "release event", ev[0], "error.type")
	if s, x := advisoryotel.Tracked(h.obs); s != 0 || x != 0 {
		t.Errorf("%d and %d grants left remembered; want none", s, x)
	}
}

// testXact takes a shared transaction lock with WithXactLock, whose end
// the scope reports: a hold of level transaction and mode shared.
func testXact(t *testing.T, db *sql.DB) {
	h := newHarness(t)
	key := advisory.PairKey(3, 4)
	ctx, caller := h.caller(context.Background())
	before := time.Now()
	err := advisory.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sql.Tx) error { return nil },
		advisory.Shared(), advisory.WithObserver(h.obs))
	after := time.Now()
	caller.End()
	if err != nil {
		t.Fatal(err)
	}

	c := h.callerSpan(t)
	s := h.acquireSpan(t, c, before, after)
	requireAttrs(t, "acquire span", attrs(s),
		attribute.String("db.operation.name", "xact lock shared"),
		advisoryotel.KeyAttr.String("3:4"),
		advisoryotel.ModeAttr.String("shared"),
		advisoryotel.LevelAttr.String("transaction"),
		advisoryotel.OutcomeAttr.String("acquired"))
	wantCounts(t, h, advisoryotel.AcquisitionsMetric, map[string]int64{xactShared + ",pgadvisory.lock.outcome=acquired": 1})
	if got := holdCounts(t, h); !equalMaps(got, map[string]uint64{xactShared: 1}) {
		t.Errorf("holds %v; want one %s", got, xactShared)
	}
	ev := releaseEvents(c)
	if len(ev) != 1 {
		t.Fatalf("%d release events on the caller's span; want 1", len(ev))
	}
	requireAttrs(t, "release event", ev[0], attribute.String("db.operation.name", "xact end"),
		advisoryotel.ModeAttr.String("shared"), advisoryotel.LevelAttr.String("transaction"))
}

// holdKey takes key on a session of its own from db, released at t's
// cleanup.
func holdKey(t *testing.T, db *sql.DB, key int64) {
	t.Helper()
	conn := pgtest.Conn(t, db)
	pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_lock($1)", key)
	t.Cleanup(func() { pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_unlock($1)", key) })
}

// testBusy tries a key another session holds: an acquire span with
// outcome busy and no error status, a busy acquisition, no hold and no
// release.
func testBusy(t *testing.T, db *sql.DB) {
	holdKey(t, db, 102)
	h := newHarness(t)
	ctx, caller := h.caller(context.Background())
	before := time.Now()
	err := advisory.WithSessionLock(ctx, db, advisory.Int64Key(102), func(context.Context, *sql.Conn) error {
		return errors.New("fn ran although the key is held")
	}, advisory.Try(), advisory.WithObserver(h.obs))
	after := time.Now()
	caller.End()
	if !errors.Is(err, advisory.ErrNotAcquired) {
		t.Fatalf("WithSessionLock = %v; want ErrNotAcquired", err)
	}

	c := h.callerSpan(t)
	s := h.acquireSpan(t, c, before, after)
	got := attrs(s)
	requireAttrs(t, "acquire span", got, attribute.String("db.operation.name", "try lock"), advisoryotel.OutcomeAttr.String("busy"))
	requireNoAttrs(t, "acquire span", got, "error.type", "db.response.status_code")
	if s.Status().Code != codes.Unset || len(s.Events()) != 0 {
		t.Errorf("acquire span status %v, events %v; want unset, none", s.Status().Code, s.Events())
	}
	wantCounts(t, h, advisoryotel.AcquisitionsMetric, map[string]int64{sessionExclusive + ",pgadvisory.lock.outcome=busy": 1})
	if got := holdCounts(t, h); len(got) != 0 {
		t.Errorf("holds %v; want none", got)
	}
	if ev := releaseEvents(c); len(ev) != 0 {
		t.Errorf("release events %v; want none", ev)
	}
}

// testTimedOut waits, bounded by Wait, for a key another session holds:
// an acquire span with outcome timeout, no error status, at least as long
// as the bound, and a timeout in the metrics.
func testTimedOut(t *testing.T, db *sql.DB) {
	holdKey(t, db, 103)
	h := newHarness(t)
	ctx, caller := h.caller(context.Background())
	const bound = 300 * time.Millisecond
	before := time.Now()
	err := advisory.WithXactLock(ctx, db, advisory.Int64Key(103), func(context.Context, *sql.Tx) error {
		return errors.New("fn ran although the key is held")
	}, advisory.Wait(bound), advisory.WithObserver(h.obs))
	after := time.Now()
	caller.End()
	if !errors.Is(err, advisory.ErrLockTimeout) {
		t.Fatalf("WithXactLock = %v; want ErrLockTimeout", err)
	}

	c := h.callerSpan(t)
	s := h.acquireSpan(t, c, before, after)
	requireAttrs(t, "acquire span", attrs(s),
		attribute.String("db.operation.name", "xact lock"),
		advisoryotel.LevelAttr.String("transaction"),
		advisoryotel.OutcomeAttr.String("timeout"),
		attribute.String("db.response.status_code", "55P03"))
	if s.Status().Code != codes.Unset {
		t.Errorf("acquire span status %v; want unset: a bounded wait that runs out is an answer", s.Status().Code)
	}
	// The server waits the bound before it answers; the span, from
	// sending to the answer, cannot be shorter.
	if d := s.EndTime().Sub(s.StartTime()); d < bound {
		t.Errorf("acquire span lasts %v; want at least the wait's bound, %v", d, bound)
	}
	wantCounts(t, h, advisoryotel.AcquisitionsMetric, map[string]int64{xactExclusive + ",pgadvisory.lock.outcome=timeout": 1})
	if got := holdCounts(t, h); len(got) != 0 {
		t.Errorf("holds %v; want none", got)
	}
}

// testDeadlock crosses two sessions' keys so that the observed wait is
// the one the server breaks: its session waits first and checks for a
// deadlock after 50ms, the other's only after a minute. The acquire span
// has status Error, the error recorded, and SQLSTATE 40P01.
func testDeadlock(t *testing.T, db *sql.DB) {
	const a, b = 104, 105
	other, observed := pgtest.Conn(t, db), pgtest.Conn(t, db)
	pgtest.Exec(t, other, "SET deadlock_timeout = '60s'")
	pgtest.Exec(t, other, "SELECT pg_catalog.pg_advisory_lock($1)", a)
	pgtest.Exec(t, observed, "SET deadlock_timeout = '50ms'")
	pgtest.Exec(t, observed, "SELECT pg_catalog.pg_advisory_lock($1)", b)

	h := newHarness(t)
	ctx, caller := h.caller(context.Background())
	before := time.Now()
	lockErr := make(chan error, 1)
	go func() {
		lockErr <- advisory.WithSessionLockConn(ctx, observed, advisory.Int64Key(a), func(context.Context, *sql.Conn) error {
			return errors.New("fn ran in a deadlock")
		}, advisory.WithObserver(h.obs))
	}()
	pgtest.AwaitWaiting(t, db, advisory.Int64Key(a))
	otherErr := make(chan error, 1)
	go func() {
		_, err := other.ExecContext(context.Background(), "SELECT pg_catalog.pg_advisory_lock($1)", b)
		otherErr <- err
	}()
	err := <-lockErr
	after := time.Now()
	caller.End()
	if !errors.Is(err, advisory.ErrDeadlock) {
		t.Fatalf("WithSessionLockConn = %v; want ErrDeadlock", err)
	}
	// The observed session was closed, which released b: the other
	// session's wait is granted.
	if err := <-otherErr; err != nil {
		t.Fatalf("the other session's lock: %v", err)
	}
	pgtest.Exec(t, other, "SELECT pg_catalog.pg_advisory_unlock_all()")
	pgtest.Exec(t, other, "RESET deadlock_timeout")

	s := h.acquireSpan(t, h.callerSpan(t), before, after)
	requireAttrs(t, "acquire span", attrs(s),
		advisoryotel.OutcomeAttr.String("deadlock"),
		attribute.String("db.response.status_code", "40P01"),
		attribute.String("error.type", "40P01"))
	if s.Status().Code != codes.Error || s.Status().Description != err.Error() {
		t.Errorf("acquire span status %v %q; want Error %q", s.Status().Code, s.Status().Description, err.Error())
	}
	if len(s.Events()) != 1 || s.Events()[0].Name != "exception" {
		t.Errorf("acquire span events %v; want the error recorded", s.Events())
	}
	wantCounts(t, h, advisoryotel.AcquisitionsMetric, map[string]int64{sessionExclusive + ",pgadvisory.lock.outcome=deadlock": 1})
}

// lossNotifier is an Observer that says when it has observed a loss.
type lossNotifier struct {
	*advisoryotel.Observer
	lost chan struct{}
}

func (n *lossNotifier) ObserveLoss(ctx context.Context, l advisory.Loss) {
	n.Observer.ObserveLoss(ctx, l)
	close(n.lost)
}

// testLeaseLost terminates the backend of a lease, with
// pg_terminate_backend: the lost counter counts it, a loss span with
// status Error is a child of the span current at Acquire, and no hold is
// recorded.
func testLeaseLost(t *testing.T, db *sql.DB) {
	h := newHarness(t)
	key := advisory.PairKey(5, 6)
	ctx, caller := h.caller(context.Background())
	n := &lossNotifier{Observer: h.obs, lost: make(chan struct{})}
	before := time.Now()
	l, err := advisory.Acquire(ctx, db, key, advisory.Heartbeat(100*time.Millisecond), advisory.WithObserver(n))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	pid := pgtest.AwaitHolder(t, db, key)
	pgtest.Exec(t, db, "SELECT pg_catalog.pg_terminate_backend($1)", pid)
	select {
	case <-n.lost:
	case <-time.After(pgtest.PollTimeout):
		t.Fatalf("no loss observed within %v of the termination", pgtest.PollTimeout)
	}
	<-l.Done()
	if err := l.Release(context.Background()); !errors.Is(err, advisory.ErrLockLost) {
		t.Errorf("Release = %v; want ErrLockLost", err)
	}
	pgtest.AwaitGone(t, db, pid)
	caller.End()

	c := h.callerSpan(t)
	h.acquireSpan(t, c, before, after)
	loss := h.oneSpan(t, advisoryotel.LossSpan)
	if loss.Parent().SpanID() != c.SpanContext().SpanID() {
		t.Errorf("loss span's parent %s; want the caller's span %s", loss.Parent().SpanID(), c.SpanContext().SpanID())
	}
	if loss.Status().Code != codes.Error || loss.StartTime().Before(after) {
		t.Errorf("loss span status %v at %v; want Error, after the acquisition at %v", loss.Status().Code, loss.StartTime(), after)
	}
	requireAttrs(t, "loss span", attrs(loss), advisoryotel.KeyAttr.String("5:6"),
		advisoryotel.ModeAttr.String("exclusive"), advisoryotel.LevelAttr.String("session"))
	wantCounts(t, h, advisoryotel.LostMetric, map[string]int64{"": 1})
	wantCounts(t, h, advisoryotel.AcquisitionsMetric, map[string]int64{sessionExclusive + ",pgadvisory.lock.outcome=acquired": 1})
	if got := holdCounts(t, h); len(got) != 0 {
		t.Errorf("holds %v; want none for a lost lease", got)
	}
	if s, x := advisoryotel.Tracked(h.obs); s != 0 || x != 0 {
		t.Errorf("%d and %d grants left remembered; want none", s, x)
	}
}

// TestSetObserverIntegration installs the observer with
// advisory.SetObserver, which the plain lock functions report to, and
// takes and releases session locks of both modes, a transaction lock and
// several keys at once. It sets the process's observer, so it does not
// run in parallel.
func TestSetObserverIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		h := newHarness(t)
		advisory.SetObserver(h.obs)
		t.Cleanup(func() { advisory.SetObserver(nil) })
		db := pgtest.NewDatabase(t, tg, "advisoryotel_set").DB
		conn, other := pgtest.Conn(t, db), pgtest.Conn(t, db)
		k, x, k3, k4 := advisory.PairKey(11, 1), advisory.PairKey(11, 2), advisory.PairKey(11, 3), advisory.PairKey(11, 4)
		ctx, caller := h.caller(context.Background())
		check := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		check("Lock", advisory.Lock(ctx, conn, k))
		ok, err := advisory.TryLock(ctx, other, k)
		check("TryLock", err)
		if ok {
			t.Fatal("TryLock on another session took a held key")
		}
		check("Unlock", advisory.Unlock(ctx, conn, k))
		for _, c := range []*sql.Conn{conn, other} {
			ok, err := advisory.TryLockShared(ctx, c, k)
			check("TryLockShared", err)
			if !ok {
				t.Fatal("TryLockShared refused a key held shared")
			}
		}
		check("UnlockShared", advisory.UnlockShared(ctx, other, k))
		check("UnlockShared", advisory.UnlockShared(ctx, conn, k))
		tx, err := db.BeginTx(ctx, nil)
		check("BeginTx", err)
		check("XactLock", advisory.XactLock(ctx, tx, x))
		check("Commit", tx.Commit())
		check("LockKeys", advisory.LockKeys(ctx, conn, k3, k4))
		check("UnlockKeys", advisory.UnlockKeys(ctx, conn, k3, k4))
		caller.End()

		c := h.callerSpan(t)
		acquires := h.ended(advisoryotel.AcquireSpan)
		var ops []string
		for _, s := range acquires {
			if s.Parent().SpanID() != c.SpanContext().SpanID() {
				t.Errorf("acquire span %v is not the caller's child", attrs(s))
			}
			ops = append(ops, attrs(s)["db.operation.name"].AsString()+"/"+attrs(s)[advisoryotel.OutcomeAttr].AsString())
		}
		wantOps := []string{"lock/acquired", "try lock/busy", "try lock shared/acquired", "try lock shared/acquired", "xact lock/acquired", "lock/acquired"}
		if !slices.Equal(ops, wantOps) {
			t.Errorf("acquire spans %v; want %v", ops, wantOps)
		}
		if got := attrs(acquires[len(acquires)-1]); got[advisoryotel.KeysAttr].AsStringSlice() == nil {
			t.Errorf("LockKeys' span %v; want the keys in %s", got, advisoryotel.KeysAttr)
		}
		wantCounts(t, h, advisoryotel.AcquisitionsMetric, map[string]int64{
			sessionExclusive + ",pgadvisory.lock.outcome=acquired": 2,
			sessionExclusive + ",pgadvisory.lock.outcome=busy":     1,
			sessionShared + ",pgadvisory.lock.outcome=acquired":    2,
			xactExclusive + ",pgadvisory.lock.outcome=acquired":    1,
		})
		// The transaction lock's end is not reported: no hold, and its
		// grant is left remembered.
		if got := holdCounts(t, h); !equalMaps(got, map[string]uint64{sessionExclusive: 3, sessionShared: 2}) {
			t.Errorf("holds %v; want 3 %s and 2 %s", got, sessionExclusive, sessionShared)
		}
		if s, x := advisoryotel.Tracked(h.obs); s != 0 || x != 1 {
			t.Errorf("%d session and %d transaction grants remembered; want 0 and 1", s, x)
		}
		var releases []string
		for _, e := range releaseEvents(c) {
			releases = append(releases, e["db.operation.name"].AsString())
		}
		if want := []string{"unlock", "unlock shared", "unlock shared", "unlock"}; !slices.Equal(releases, want) {
			t.Errorf("release events %v; want %v", releases, want)
		}
	})
}
