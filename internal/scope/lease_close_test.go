package scope

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Tests of a lease whose connection is closed while its heartbeat works
// on it. database/sql's Raw, as every method of a *sql.Conn, checks that
// the Conn is open and only then takes its lock and reads its driver
// connection; a close that lands between the two has set that connection
// to nil, and the method panics on it. A close may come from the caller
// once Release has returned (a deferred Close of a conn handed to Watch,
// or of the caller's own conn), from database/sql itself when a statement
// of the caller's on the lease's conn meets a dead session and reports
// driver.ErrBadConn, or from the lease, whose close then makes a
// statement of the caller's panic in the same way.

// execFunc answers a statement of a hookConn.
type execFunc func(ctx context.Context, query string) (driver.Result, error)

// hookConnector makes hookConns that answer every statement with exec.
type hookConnector struct{ exec execFunc }

func (c hookConnector) Connect(context.Context) (driver.Conn, error) {
	return &hookConn{exec: c.exec}, nil
}
func (c hookConnector) Driver() driver.Driver { return hookDriver{c} }

// hookDriver is the driver of a hookConnector.
type hookDriver struct{ c hookConnector }

func (d hookDriver) Open(string) (driver.Conn, error) { return d.c.Connect(context.Background()) }

// hookConn is a driver connection that runs statements through exec and
// records its close.
type hookConn struct {
	exec   execFunc
	closed atomic.Bool
}

var (
	_ driver.Conn          = (*hookConn)(nil)
	_ driver.ExecerContext = (*hookConn)(nil)
)

func (c *hookConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("hookConn: no prepared statements")
}
func (c *hookConn) Begin() (driver.Tx, error) { return nil, errors.New("hookConn: no transactions") }
func (c *hookConn) Close() error              { c.closed.Store(true); return nil }

func (c *hookConn) ExecContext(ctx context.Context, query string, _ []driver.NamedValue) (driver.Result, error) {
	if c.closed.Load() {
		return nil, driver.ErrBadConn
	}
	return c.exec(ctx, query)
}

// hookSession opens a database of hookConns that answer with exec, and
// returns one of its connections and the driver connection under it.
func hookSession(t *testing.T, exec execFunc) (*sql.DB, *sql.Conn, *hookConn) {
	t.Helper()
	db := sql.OpenDB(hookConnector{exec: exec})
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var hc *hookConn
	if err := conn.Raw(func(dc any) error { hc = dc.(*hookConn); return nil }); err != nil {
		t.Fatal(err)
	}
	return db, conn, hc
}

// testLeaseKey is the key of the leases these tests build.
var testLeaseKey = sqltext.Key{Bigint: 42}

// newTestLease returns a lease of testLeaseKey on conn, as StartLease
// leaves it once its first round trip has confirmed the lock, with its
// heartbeat not started; go l.watch() starts it.
func newTestLease(conn *sql.Conn, owned bool, interval time.Duration) *Lease {
	l := &Lease{s: (*sqlConn)(conn), key: testLeaseKey, o: Options{Heartbeat: interval}, owned: owned,
		pid: 7, mark: 9, interval: interval}
	l.holds = sqltext.Holds(l.pid, false, l.key, l.mark)
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	return l
}

// isReclaim reports whether query is the statement that ends the lease of
// newTestLease, which reclaim and Release send.
func isReclaim(l *Lease, query string) bool {
	return query == sqltext.LeaseEnd(l.pid, l.mark, false, l.owned, l.key)
}

// TestLeaseReleaseAfterLossWaitsForItsHeartbeat shows that Release of a
// lost lease returns only once its heartbeat has finished with conn: it
// has sent the statement that undoes the lock behind a pooler, and
// discarded the session. The heartbeat's statement finds the lock gone,
// and the statement that undoes it waits until the test lets it answer.
// Release is called while it waits, and must still be waiting when every
// goroutine of the bubble is blocked. A Release that returned then would
// let its caller close conn under the heartbeat, which database/sql does
// not survive (it panics in Raw), and which would return the session to
// the pool before the heartbeat could discard it.
func TestLeaseReleaseAfterLossWaitsForItsHeartbeat(t *testing.T) {
	t.Parallel()
	for _, owned := range []bool{true, false} {
		name := map[bool]string{true: "Owned", false: "CallersConn"}[owned]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const hb = time.Second
				var l *Lease
				reclaiming := make(chan struct{})
				answer := make(chan struct{})
				var released atomic.Bool
				var late atomic.Int32 // statements sent after Release returned
				exec := func(ctx context.Context, query string) (driver.Result, error) {
					if released.Load() {
						late.Add(1)
					}
					if isReclaim(l, query) {
						close(reclaiming)
						<-answer
						return driver.RowsAffected(0), nil
					}
					return driver.RowsAffected(0), nil // the heartbeat: the lock is gone
				}
				db, conn, hc := hookSession(t, exec)
				defer db.Close()
				l = newTestLease(conn, owned, hb)
				go l.watch()

				<-reclaiming // lost, and undoing the lock
				errc := make(chan error, 1)
				go func() {
					err := l.Release(context.Background())
					released.Store(true)
					errc <- err
				}()
				synctest.Wait()
				if released.Load() {
					close(answer)
					t.Fatal("Release returned while the heartbeat was still undoing the lock on conn")
				}
				close(answer)
				if err := <-errc; !errors.Is(err, ErrLockLost) {
					t.Errorf("Release = %v, want ErrLockLost", err)
				}
				if !hc.closed.Load() {
					t.Error("Release returned before the session was discarded")
				}
				if n := late.Load(); n != 0 {
					t.Errorf("%d statements sent on conn after Release returned", n)
				}
				// The caller's close, as a deferred one would, finds the
				// session gone.
				if err := conn.Close(); !errors.Is(err, sql.ErrConnDone) {
					t.Errorf("conn.Close after Release = %v, want sql.ErrConnDone", err)
				}
			})
		})
	}
}

// TestLeaseAbandonedByReleaseEndsItsSession shows what happens to a lease
// whose Release gives up waiting for its heartbeat, stuck on a driver
// that does not give its statement up, after ReleaseTimeout, in a bubble
// of testing/synctest whose clock moves only when every goroutine waits:
// Release reports the lease lost and leaves conn to the heartbeat; when
// the statement answers at last, even that the lock is held, the
// heartbeat ends the session, so that the server drops the lock, and
// discards conn when the lease owns it. A caller's conn stays open for
// the caller to close.
func TestLeaseAbandonedByReleaseEndsItsSession(t *testing.T) {
	t.Parallel()
	for _, owned := range []bool{true, false} {
		name := map[bool]string{true: "Owned", false: "CallersConn"}[owned]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				// A heartbeat's own bound, its interval, outlasts
				// ReleaseTimeout.
				const hb = 3 * ReleaseTimeout
				beating := make(chan struct{})
				answer := make(chan struct{})
				var beats atomic.Int32
				exec := func(ctx context.Context, query string) (driver.Result, error) {
					if beats.Add(1) == 1 {
						close(beating)
						<-answer // deaf to ctx, as a driver that does not give up
					}
					return driver.RowsAffected(1), nil // held
				}
				db, conn, hc := hookSession(t, exec)
				defer db.Close()
				l := newTestLease(conn, owned, hb)
				go l.watch()

				<-beating
				if err := l.Release(context.Background()); !errors.Is(err, ErrLockLost) {
					t.Errorf("Release = %v, want ErrLockLost", err)
				}
				if hc.closed.Load() {
					t.Error("the session ended while the heartbeat's statement ran")
				}
				close(answer)
				<-l.done
				if !hc.closed.Load() {
					t.Error("the heartbeat stopped and left the session, and its lock, open")
				}
				err := conn.Raw(func(any) error { return nil })
				switch {
				case owned && !errors.Is(err, sql.ErrConnDone):
					t.Errorf("conn after the heartbeat stopped: Raw = %v, want sql.ErrConnDone", err)
				case !owned && err != nil:
					t.Errorf("the caller's conn after the heartbeat stopped: Raw = %v, want it open", err)
				}
				_ = conn.Close()
			})
		})
	}
}

// TestLeaseHeartbeatSurvivesACloseOfItsConn races each step of the
// heartbeat that works on conn (a heartbeat that proves the lock, and the
// loss's reclaim and end of the session) against a close of conn: the
// caller's Close, or database/sql's own after a statement of the
// caller's on conn reported driver.ErrBadConn. database/sql panics when
// the close lands inside a call on conn between its check that conn is
// open and its lock: the heartbeat's calls must not, and neither may the
// caller's statement, which the lease must not close conn under. Each run
// starts the close a varying while after the step, so that over many
// runs some land in that window; the log says how many the heartbeat met.
func TestLeaseHeartbeatSurvivesACloseOfItsConn(t *testing.T) {
	runs := 20000
	if testing.Short() {
		runs = 2000
	}
	steps := []struct {
		name string
		run  func(l *Lease)
	}{
		{"Beat", func(l *Lease) { _ = l.beat() }},
		{"Loss", func(l *Lease) { l.lost(errors.New("test: the lock is gone")) }},
	}
	closes := []struct {
		name  string
		close func(conn *sql.Conn)
	}{
		{"Close", func(conn *sql.Conn) { _ = conn.Close() }},
		{"BadConn", func(conn *sql.Conn) { _, _ = conn.ExecContext(context.Background(), "bad conn") }},
	}
	for _, st := range steps {
		for _, cl := range closes {
			t.Run(st.name+"/"+cl.name, func(t *testing.T) {
				exec := func(_ context.Context, query string) (driver.Result, error) {
					if query == "bad conn" {
						return nil, driver.ErrBadConn
					}
					return driver.RowsAffected(1), nil
				}
				db := sql.OpenDB(hookConnector{exec: exec})
				defer db.Close()
				var panics []string
				races := closeRaces.Load()
				for i := range runs {
					conn, err := db.Conn(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					l := newTestLease(conn, true, time.Second)
					var ready atomic.Bool
					var wg sync.WaitGroup
					var p string
					wg.Go(func() {
						p = recovered(func() {
							ready.Store(true)
							st.run(l)
						})
					})
					for !ready.Load() {
						runtime.Gosched()
					}
					for range i % 256 {
						spin.Add(1)
					}
					callerPanic := recovered(func() { cl.close(conn) })
					wg.Wait()
					if p != "" {
						panics = append(panics, "the heartbeat's "+st.name+": "+p)
					}
					if callerPanic != "" {
						panics = append(panics, "the caller's "+cl.name+": "+callerPanic)
					}
					_ = conn.Close()
				}
				if len(panics) > 0 {
					t.Fatalf("%d of %d runs panicked, first: %s", len(panics), runs, panics[0])
				}
				t.Logf("%d of %d runs met a close inside database/sql's window", closeRaces.Load()-races, runs)
			})
		}
	}
}

// spin is what the close's delay counts on.
var spin atomic.Int64

// recovered runs f and returns the panic it raised, with its stack, or "".
func recovered(f func()) (p string) {
	defer func() {
		if r := recover(); r != nil {
			p = fmt.Sprintf("%v\n%s", r, debug.Stack())
		}
	}()
	f()
	return ""
}
