package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// recorder is an Observer that keeps what it sees of one key, so that
// tests running beside it do not disturb it.
type recorder struct {
	key advisory.Key

	mu       sync.Mutex
	acquires []advisory.Acquisition
	releases []advisory.Release
	losses   []advisory.Loss
}

func (r *recorder) ObserveAcquire(_ context.Context, a advisory.Acquisition) {
	if len(a.Keys) > 0 && a.Keys[0] == r.key {
		r.mu.Lock()
		r.acquires = append(r.acquires, a)
		r.mu.Unlock()
	}
}

func (r *recorder) ObserveRelease(_ context.Context, rel advisory.Release) {
	if len(rel.Keys) > 0 && rel.Keys[0] == r.key {
		r.mu.Lock()
		r.releases = append(r.releases, rel)
		r.mu.Unlock()
	}
}

func (r *recorder) ObserveLoss(_ context.Context, l advisory.Loss) {
	if l.Key == r.key {
		r.mu.Lock()
		r.losses = append(r.losses, l)
		r.mu.Unlock()
	}
}

var _ advisory.Observer = (*recorder)(nil)

func TestObserverScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("XactBusy", func(t *testing.T) {
		t.Parallel()
		key := advisory.Int64Key(9001)
		rec := &recorder{key: key}
		db, m := mock.New(t)
		mock.ExpectWithXactLock(m, key, mock.XactNotAcquired, advisory.Try())
		err := advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { return nil },
			advisory.Try(), advisory.WithObserver(rec))
		if !errors.Is(err, advisory.ErrNotAcquired) {
			t.Fatal(err)
		}
		if len(rec.acquires) != 1 || rec.acquires[0].Outcome != advisory.Busy || !rec.acquires[0].Xact || rec.acquires[0].Op != "try xact lock" {
			t.Fatalf("acquisitions %+v; want one busy try xact lock", rec.acquires)
		}
		if len(rec.releases) != 0 {
			t.Fatalf("releases %+v; want none", rec.releases)
		}
	})
	t.Run("XactCommit", func(t *testing.T) {
		t.Parallel()
		key := advisory.PairKey(7, 9002)
		rec := &recorder{key: key}
		db, m := mock.New(t)
		mock.ExpectWithXactLock(m, key, mock.Commit, advisory.Shared())
		err := advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { return nil },
			advisory.Shared(), advisory.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.acquires) != 1 || rec.acquires[0].Outcome != advisory.Acquired || !rec.acquires[0].Shared {
			t.Fatalf("acquisitions %+v; want one shared, acquired", rec.acquires)
		}
		if len(rec.releases) != 1 || rec.releases[0].Op != "xact end" || rec.releases[0].Err != nil {
			t.Fatalf("releases %+v; want one clean xact end", rec.releases)
		}
	})
	t.Run("SessionLost", func(t *testing.T) {
		t.Parallel()
		key := advisory.Int64Key(9003)
		rec := &recorder{key: key}
		db, m := mock.New(t)
		mock.ExpectWithSessionLock(m, key, mock.Release).Unlock.WillReturnResult(rows(0))
		m.ExpectClose()
		err := advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error { return nil },
			advisory.WithObserver(rec))
		if !errors.Is(err, advisory.ErrLockLost) {
			t.Fatal(err)
		}
		if len(rec.releases) != 1 || !errors.Is(rec.releases[0].Err, advisory.ErrLockLost) {
			t.Fatalf("releases %+v; want one that lost the lock", rec.releases)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		key := advisory.Int64Key(9004)
		rec := &recorder{key: key}
		db, m := mock.New(t)
		mock.ExpectWithXactLock(m, key, mock.XactFailed)
		err := advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { return nil },
			advisory.WithObserver(rec))
		if !errors.Is(err, advisory.ErrLockTimeout) {
			t.Fatal(err)
		}
		if len(rec.acquires) != 1 || rec.acquires[0].Outcome != advisory.TimedOut || rec.acquires[0].Err == nil {
			t.Fatalf("acquisitions %+v; want one timed out", rec.acquires)
		}
	})
}

// TestObserverDefault checks the process-wide observer on the plain
// functions. It filters by key, so tests running beside it only add to
// what it ignores.
func TestObserverDefault(t *testing.T) {
	key := advisory.Int64Key(9005)
	rec := &recorder{key: key}
	advisory.SetObserver(rec)
	t.Cleanup(func() { advisory.SetObserver(nil) })
	db, m := mock.New(t)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mock.ExpectTryLock(m, key, true)
	mock.ExpectUnlock(m, key, true)
	if ok, err := advisory.TryLock(context.Background(), conn, key); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := advisory.Unlock(context.Background(), conn, key); err != nil {
		t.Fatal(err)
	}
	advisory.SetObserver(nil)
	mock.ExpectLock(m, key)
	if err := advisory.Lock(context.Background(), conn, key); err != nil {
		t.Fatal(err)
	}
	if len(rec.acquires) != 1 || rec.acquires[0].Outcome != advisory.Acquired || rec.acquires[0].Op != "try lock" {
		t.Fatalf("acquisitions %+v; want the try alone", rec.acquires)
	}
	if len(rec.releases) != 1 || rec.releases[0].Op != "unlock" || rec.releases[0].Err != nil {
		t.Fatalf("releases %+v; want one clean unlock", rec.releases)
	}
}
