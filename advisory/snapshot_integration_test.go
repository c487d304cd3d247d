package advisory_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// handoffBound is how soon after its release a waiter must get the key
// in TestWaitHoldsNoSnapshotIntegration: well under a slice, since a
// waiter stays queued in the server between its slices but for a round
// trip, and generous for a loaded machine.
const handoffBound = 2 * time.Second

// waitEntryPoints are the public calls that wait for a busy key, each as
// a pgtest.Waiter, and whether CREATE INDEX CONCURRENTLY can finish while
// it waits: not for a wait in a transaction the caller keeps open.
var waitEntryPoints = []struct {
	name string
	cic  bool
	wait func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error
}{
	{"Lock", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return onConn(ctx, db, func(conn *sql.Conn) error {
			if err := advisory.Lock(ctx, conn, key); err != nil {
				return err
			}
			held()
			return advisory.Unlock(ctx, conn, key)
		})
	}},
	{"LockShared", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return onConn(ctx, db, func(conn *sql.Conn) error {
			if err := advisory.LockShared(ctx, conn, key); err != nil {
				return err
			}
			held()
			return advisory.UnlockShared(ctx, conn, key)
		})
	}},
	{"LockKeys", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		other := advisory.PairKey(-7, -7)
		return onConn(ctx, db, func(conn *sql.Conn) error {
			if err := advisory.LockKeys(ctx, conn, key, other); err != nil {
				return err
			}
			held()
			return advisory.UnlockKeys(ctx, conn, key, other)
		})
	}},
	{"XactLock", false, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if err := advisory.XactLock(ctx, tx, key); err != nil {
				return err
			}
			held()
			return nil
		})
	}},
	{"XactLockKeys", false, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if err := advisory.XactLockKeys(ctx, tx, key, advisory.Int64Key(-7)); err != nil {
				return err
			}
			held()
			return nil
		})
	}},
	{"WithSessionLock", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
			held()
			return nil
		})
	}},
	{"WithSessionLockTimeout", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
			held()
			return nil
		}, advisory.Wait(time.Minute))
	}},
	{"WithXactLock", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error {
			held()
			return nil
		})
	}},
	{"WithXactLockRepeatableRead", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error {
			held()
			return nil
		}, advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelRepeatableRead}))
	}},
	{"WithXactLockTx", false, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		return advisory.WithXactLockTx(ctx, tx, key, func(context.Context, *sql.Tx) error {
			held()
			return nil
		})
	}},
	{"Acquire", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		l, err := advisory.Acquire(ctx, db, key)
		if err != nil {
			return err
		}
		held()
		return l.Release(ctx)
	}},
	{"LockerAcquire", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		locker, err := advisory.NewLocker(db, advisory.LockerConfig{})
		if err != nil {
			return err
		}
		defer locker.Close(ctx)
		l, err := locker.Acquire(ctx, key)
		if err != nil {
			return err
		}
		held()
		return l.Release(ctx)
	}},
}

// TestWaitHoldsNoSnapshotIntegration proves, for every call that waits
// for a busy key, that the wait holds no snapshot for longer than a slice:
// VACUUM removes rows deleted while it waits, and CREATE INDEX
// CONCURRENTLY finishes; and that the key goes to the waiter as soon as it
// is free.
func TestWaitHoldsNoSnapshotIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		for _, e := range waitEntryPoints {
			t.Run(e.name, func(t *testing.T) {
				key := keys.nextPair()
				wait := func(ctx context.Context, db *sql.DB, _ pgtest.Key, held func()) error {
					return e.wait(ctx, db, key, held)
				}
				vacuumed, handoff := pgtest.RequireNoSnapshotWait(t, tg, key, pgtest.SnapshotCheck{CIC: e.cic}, wait)
				if handoff > handoffBound {
					t.Errorf("the waiter got the key %v after its release; want within %v", handoff, handoffBound)
				}
				t.Logf("dead rows removed %v after the delete; key handed over %v after its release", vacuumed, handoff)
			})
		}
	})
}

// onConn runs f on a connection of its own from db, and closes it.
func onConn(ctx context.Context, db *sql.DB, f func(*sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(conn)
}

// inTx runs f in a transaction of db's, which it then commits.
func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}
