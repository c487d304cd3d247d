package pgxlock

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgadvisory/pgadvisory/advisory"
)

// Leases and the Locker run on database/sql over the pool's own
// connections (stdlib.OpenDBFromPool, which keeps no idle connections of
// its own): a lease is long-lived, so the bridge costs nothing that
// counts, and they keep every guarantee of advisory's, proven there. A
// session in doubt is closed under database/sql, and pgxpool destroys
// it. Each Lease and Locker has a *sql.DB of its own, closed when it is
// done, so that nothing outlives it.

// A Lease is an [advisory.Lease] held on a connection of a pgx pool: a
// session lock watched by a heartbeat, whose Context ends the moment the
// lock is lost or released. Its methods are advisory.Lease's, and Release
// also gives back what the lease took from the pool.
type Lease struct {
	*advisory.Lease
	db   *sql.DB
	once sync.Once
}

// Acquire takes a session lock on key on a connection of pool, held for
// the lease alone, and starts its heartbeat, as [advisory.Acquire] does:
// the same options, waits, refusals (a hot standby, a transaction pooler)
// and errors. The lock is held until [Lease.Release], or until the lease
// is lost, when its Context ends; the connection goes back to the pool at
// Release, or is destroyed if it is in doubt.
func Acquire(ctx context.Context, pool *pgxpool.Pool, key advisory.Key, opts ...advisory.LeaseOption) (*Lease, error) {
	if pool == nil {
		return nil, errNilPool
	}
	db := stdlib.OpenDBFromPool(pool)
	l, err := advisory.Acquire(ctx, db, key, opts...)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Lease{Lease: l, db: db}, nil
}

// Release stops the heartbeat and releases the lock, as
// [advisory.Lease.Release] does, and then gives back the lease's
// connection to the pool. Later calls return the first result.
func (l *Lease) Release(ctx context.Context) error {
	err := l.Lease.Release(ctx)
	l.once.Do(func() { _ = l.db.Close() })
	return err
}

// A Locker is an [advisory.Locker] on a pgx pool: many leases on a few of
// the pool's connections. Its methods are advisory.Locker's, and Close
// also gives back what the Locker took from the pool.
type Locker struct {
	*advisory.Locker
	db   *sql.DB
	once sync.Once
}

// NewLocker returns a Locker that holds its leases on connections of
// pool, as [advisory.NewLocker] does on a *sql.DB, with the same
// configuration. Every lease it grants is held until its Release, a loss,
// or the Locker's Close.
func NewLocker(pool *pgxpool.Pool, cfg advisory.LockerConfig) (*Locker, error) {
	if pool == nil {
		return nil, errNilPool
	}
	db := stdlib.OpenDBFromPool(pool)
	l, err := advisory.NewLocker(db, cfg)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Locker{Locker: l, db: db}, nil
}

// Close releases every lease of the Locker, as [advisory.Locker.Close]
// does, and then gives back its connections to the pool.
func (l *Locker) Close(ctx context.Context) error {
	err := l.Locker.Close(ctx)
	l.once.Do(func() { err = errors.Join(err, l.db.Close()) })
	return err
}
