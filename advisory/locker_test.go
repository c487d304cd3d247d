package advisory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/mock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Unit tests of the Locker's paths that a real server does not take on
// demand: a heartbeat that finds some keys missing, and a statement that
// lands on another session.

// expectCarrier expects a Locker connection's start on backend 7 with
// mark 9.
func expectCarrier(m sqlmock.Sqlmock) {
	m.ExpectQuery(sqltext.CarrierStart).WillReturnRows(
		sqlmock.NewRows([]string{"pid", "standby", "mark"}).AddRow(int64(7), false, int64(9)))
}

func TestLockerLosesOnlyMissingKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, m := mock.New(t, exactSQL)
	kept, gone := advisory.Int64Key(42), advisory.PairKey(1, 2)
	expectCarrier(m)
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, sqltext.Key{Bigint: 42})).WillReturnResult(sqlmock.NewResult(0, 2))
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, sqltext.Key{Pair: true, A: 1, B: 2})).WillReturnResult(sqlmock.NewResult(0, 2))
	// The heartbeat counts one lock of two, and the list names 42.
	m.ExpectQuery(sqltext.CarrierCount(7, 9)).WillReturnRows(sqlmock.NewRows([]string{"count"}).AddRow(int64(1)))
	m.ExpectQuery(sqltext.CarrierHeld(7, 9)).WillReturnRows(
		sqlmock.NewRows([]string{"classid", "objid", "objsubid", "shared"}).AddRow(int64(0), int64(42), 1, false))
	m.ExpectExec(sqltext.CarrierRelease(7, 9)).WillReturnResult(sqlmock.NewResult(0, 1))

	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1, Heartbeat: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lKept, err := lk.Acquire(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	lGone, err := lk.Acquire(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lGone.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease on the missing key was not lost")
	}
	if !errors.Is(lGone.Err(), advisory.ErrLockLost) {
		t.Fatalf("Err of the lease on the missing key = %v; want ErrLockLost", lGone.Err())
	}
	if err := lKept.Err(); err != nil {
		t.Fatalf("the lease on the key still held was lost: %v", err)
	}
	if err := lGone.Release(ctx); !errors.Is(err, advisory.ErrLockLost) {
		t.Fatalf("Release of the lost lease = %v; want ErrLockLost", err)
	}
	if err := lk.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(lKept.Err(), context.Canceled) {
		t.Fatalf("Err of the kept lease after Close = %v; want context.Canceled", lKept.Err())
	}
}

func TestLockerRefusesAnotherSession(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	expectCarrier(m)
	// No row: the statement ran on a session that is not the
	// connection's own, as behind a transaction pooler.
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, sqltext.Key{Bigint: 42})).WillReturnResult(sqlmock.NewResult(0, 0))
	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close(context.Background())
	if _, err := lk.Acquire(context.Background(), advisory.Int64Key(42)); !errors.Is(err, advisory.ErrSharedSession) {
		t.Fatalf("Acquire on another session = %v; want ErrSharedSession", err)
	}
}

func TestLockerBeatsBetweenCountsProveTheMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, m := mock.New(t, exactSQL)
	key := advisory.Int64Key(42)
	expectCarrier(m)
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, sqltext.Key{Bigint: 42})).WillReturnResult(sqlmock.NewResult(0, 2))
	// The first beat counts the locks; the next proves the session and
	// its mark alone, reading no lock table, and finds the mark gone.
	m.ExpectQuery(sqltext.CarrierCount(7, 9)).WillReturnRows(sqlmock.NewRows([]string{"count"}).AddRow(int64(1)))
	m.ExpectQuery(sqltext.CarrierAlive(7, 9)).WillReturnRows(sqlmock.NewRows([]string{"alive"}).AddRow(int64(0)))
	m.ExpectExec(sqltext.CarrierRelease(7, 9)).WillReturnResult(sqlmock.NewResult(0, 0))

	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lk.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease on a session without its mark was not lost")
	}
	if err := l.Err(); !errors.Is(err, advisory.ErrLockLost) {
		t.Fatalf("Err = %v; want ErrLockLost", err)
	}
	_ = l.Release(ctx)
	_ = lk.Close(ctx)
	// The lost connection's release is sent by its heartbeat's goroutine,
	// which Close does not wait for: the connection is no longer the
	// Locker's.
	pgtest.Await(t, "the lost connection's release", func() (bool, error) { return m.ExpectationsWereMet() == nil, nil })
}
