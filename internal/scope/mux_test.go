package scope

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

func newMock(t *testing.T) (*Mux, sqlmock.Sqlmock, func()) {
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	m.ExpectQuery(sqltext.CarrierStart).WillReturnRows(
		sqlmock.NewRows([]string{"pid", "standby", "mark"}).AddRow(int64(7), false, int64(9)))
	return NewMux(DBSource(db), 1, 0, 10*time.Second, nil), m, func() { db.Close() }
}

// Unit tests of the Mux's races, on sqlmock: what a real server does not
// show on demand.

// An acquisition that chose a carrier before Close, and waits for its
// turn while Close releases everything, must not take a lock after that
// release: the session would go back to the pool holding it.
func TestMuxCloseSendsNothingAfterItsRelease(t *testing.T) {
	mx, m, done := newMock(t)
	defer done()
	ctx := context.Background()
	k1, k2 := sqltext.Key{Bigint: 1}, sqltext.Key{Bigint: 2}
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, k1)).WillReturnResult(sqlmock.NewResult(0, 2))
	if _, err := mx.Acquire(ctx, k1, &Options{}); err != nil {
		t.Fatal(err)
	}
	m.ExpectExec(sqltext.CarrierRelease(7, 9)).WillDelayFor(100 * time.Millisecond).WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, k2)).WillReturnResult(sqlmock.NewResult(0, 2))
	// An acquisition that already chose the carrier (reserve + carrier()).
	if err := mx.reserve(ctx, k2, &Options{}, "lock", time.Time{}); err != nil {
		t.Fatal(err)
	}
	c, err := mx.carrier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- mx.Close(ctx) }()
	awaitTurnHeld(t, c) // by Close, in UnlockAll
	type res struct {
		l   *MuxLease
		err error
	}
	tried := make(chan res)
	go func() { l, err := c.try(ctx, k2, &Options{}, "lock", nil); tried <- res{l, err} }()
	r := <-tried
	t.Logf("Close: %v; try: lease=%v err=%v", <-closed, r.l != nil, r.err)
	if err := m.ExpectationsWereMet(); err == nil {
		t.Errorf("the try of key 2 ran after UnlockAll; idle conns in pool = %d", mx.src.(dbSource).db.Stats().Idle)
	}
}

// awaitTurnHeld waits until a statement holds c's turn.
func awaitTurnHeld(t *testing.T, c *carrier) {
	t.Helper()
	pgtest.Await(t, "a statement to hold the carrier's turn", func() (bool, error) { return len(c.turn) == 1, nil })
}

// Release of a lease whose carrier is being lost must report the loss,
// even while the observer is still hearing of the other losses.
type slowLost struct {
	once     sync.Once
	first    chan struct{}
	finished chan struct{} // closed when the slow observation has ended
}

func (h *slowLost) Acquired(context.Context, string, []sqltext.Key, time.Duration, bool, error) {}
func (h *slowLost) Released(context.Context, string, []sqltext.Key, error)                      {}
func (h *slowLost) Lost(context.Context, sqltext.Key, error) {
	h.once.Do(func() {
		close(h.first)
		time.Sleep(300 * time.Millisecond)
		close(h.finished)
	})
}

func TestMuxReleaseOfALostLeaseReportsTheLoss(t *testing.T) {
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m.ExpectQuery(sqltext.CarrierStart).WillReturnRows(
		sqlmock.NewRows([]string{"pid", "standby", "mark"}).AddRow(int64(7), false, int64(9)))
	h := &slowLost{first: make(chan struct{}), finished: make(chan struct{})}
	mx := NewMux(DBSource(db), 1, 0, 200*time.Millisecond, h)
	ctx := context.Background()
	var ls []*MuxLease
	for i := int64(1); i <= 2; i++ {
		m.ExpectExec(sqltext.CarrierTry(7, 9, false, sqltext.Key{Bigint: i})).WillReturnResult(sqlmock.NewResult(0, 2))
	}
	m.ExpectQuery(sqltext.CarrierCount(7, 9)).WillReturnError(errors.New("boom"))
	for i := int64(1); i <= 2; i++ {
		k := sqltext.Key{Bigint: i}
		l, err := mx.Acquire(ctx, k, &Options{})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	<-h.first
	var nils atomic.Int32
	for _, l := range ls {
		if err := l.Release(ctx); err == nil {
			nils.Add(1)
		}
	}
	<-h.finished
	for _, l := range ls {
		t.Logf("Release=%v Err=%v", l.Release(ctx), l.Err())
	}
	if nils.Load() > 0 {
		t.Errorf("%d Release(s) returned nil for a lease that was lost", nils.Load())
	}
}

// Two Close calls at once must not panic.
func TestMuxCloseTwice(t *testing.T) {
	mx, m, done := newMock(t)
	defer done()
	ctx := context.Background()
	k1 := sqltext.Key{Bigint: 1}
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, k1)).WillReturnResult(sqlmock.NewResult(0, 2))
	if _, err := mx.Acquire(ctx, k1, &Options{}); err != nil {
		t.Fatal(err)
	}
	m.ExpectExec(sqltext.CarrierRelease(7, 9)).WillDelayFor(100 * time.Millisecond).WillReturnResult(sqlmock.NewResult(0, 1))
	go mx.Close(ctx)
	mx.mu.Lock()
	c := mx.carriers[0]
	mx.mu.Unlock()
	awaitTurnHeld(t, c) // by the first Close, in UnlockAll
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("a panic on the second Close: %v", r)
		}
	}()
	mx.Close(ctx)
}

type countLost struct{ n atomic.Int32 }

func (h *countLost) Acquired(context.Context, string, []sqltext.Key, time.Duration, bool, error) {}
func (h *countLost) Released(context.Context, string, []sqltext.Key, error)                      {}
func (h *countLost) Lost(_ context.Context, k sqltext.Key, _ error)                              { h.n.Add(1) }

type pgErr struct{ code string }

func (e *pgErr) Error() string    { return "permission denied for sequence pgadvisory_fencing_token" }
func (e *pgErr) SQLState() string { return e.code }

// A fenced try that the server refuses (no USAGE on the sequence) takes
// nothing: the connection, and the leases on it, go on, and the error
// comes back as it is.
func TestMuxServerErrorKeepsTheConnection(t *testing.T) {
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m.MatchExpectationsInOrder(false)
	start := func() {
		m.ExpectQuery(sqltext.CarrierStart).WillReturnRows(
			sqlmock.NewRows([]string{"pid", "standby", "mark"}).AddRow(int64(7), false, int64(9)))
	}
	k1, k2 := sqltext.Key{Bigint: 1}, sqltext.Key{Bigint: 2}
	start()
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, k1)).WillReturnResult(sqlmock.NewResult(0, 2))
	for i := 0; i < 3; i++ {
		if i > 0 {
			start()
		}
		m.ExpectQuery(sqltext.CarrierTryFenced(sqltext.Inline, 7, 9, false, k2).Query).WillReturnError(&pgErr{"42501"})
	}
	h := &countLost{}
	mx := NewMux(DBSource(db), 1, 0, 10*time.Second, h)
	ctx := context.Background()
	l1, err := mx.Acquire(ctx, k1, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mx.Acquire(ctx, k2, &Options{Fencing: true, Try: true})
	if SQLState(err) != "42501" {
		t.Errorf("fenced Acquire = %v; want the server's 42501", err)
	}
	t.Logf("healthy lease on key 1: Err=%v; leases lost: %d", l1.Err(), h.n.Load())
	if l1.Err() != nil {
		t.Errorf("a refused fenced try lost an unrelated lease")
	}
}
