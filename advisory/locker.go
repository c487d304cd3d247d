package advisory

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// A Locker holds many leases on a few connections. Where [Acquire] pins a
// connection for each key held, a Locker carries every lease on at most
// [LockerConfig.MaxConns] dedicated connections (4 by default), so one process can hold
// a lock per tenant, per partition or per job, tens of thousands of keys,
// without running the server out of connections. Its leases are the same
// [*Lease] that Acquire returns, with the same guarantees: a loss is
// signalled within two heartbeat intervals, fencing tokens are strictly
// increasing, and nothing is left held.
//
// Create one Locker per process and database, and [Locker.Close] it when
// the process is done with it:
//
//	locker, err := advisory.NewLocker(db)
//	...
//	defer locker.Close(context.Background())
//	l, err := locker.Acquire(ctx, advisory.NameKey(tenants, id), advisory.Try())
//
// # Costs
//
// One heartbeat per connection proves every lease on it: one round trip
// that proves the session and its mark, and on the first beat and every
// twelfth counts the locks the session holds (a second one, only when
// some are missing, finds which). A try costs one round trip on a connection,
// and a release one; opening a connection, for the first acquisitions,
// costs one more. Statements on a connection are serialised, without a
// goroutine per lease: the leases on one connection share its round
// trips, so a Locker trades latency under load for connections.
//
// # Waiting
//
// A wait must not stall the statements of the other leases on a
// connection, so a Locker never waits on one. An acquisition that finds
// its key busy, without [Try], waits for it on a connection of its own
// from db, in slices that each take the key as a transaction lock and so
// let it go as they end (see [WaitSlice]), back to the pool; then a Locker
// connection tries the key again. If another session took
// the key in between, which only a session that was itself waiting for it
// can do, the wait starts again, so a Locker yields to such sessions
// rather than queueing fairly among them. Keys that are often contended
// are better taken with [Acquire] or transaction locks.
//
// So a Locker uses at most [LockerConfig.MaxConns] connections to hold its leases, plus
// one for each acquisition that is waiting for a busy key at the time; all
// come from db, within its SetMaxOpenConns.
//
// Within the process, a Locker arbitrates its own keys without a round
// trip: on one session the server would let the same key stack, so an
// acquisition that conflicts with a lease of the same Locker waits for
// that lease's release (or, with Try, fails at once).
//
// # Capacity
//
// Held advisory locks live in the server's shared lock table, which holds
// max_locks_per_transaction × (max_connections +
// max_prepared_transactions) locks for the whole server, and for every
// other kind of lock too. A Locker that holds n keys needs n of its
// slots. When the table is full, Acquire fails with an error matching
// [ErrLockTableFull]; the Locker and its other leases go on working.
type Locker struct {
	m  *scope.Mux
	db *sql.DB // for the privilege a fencing token lacks; see explainFencing
}

// A LockerConfig says how a [Locker] holds its leases. Its zero value
// holds them on at most 4 connections, a new connection opening for new
// keys once each holds 1,000, each proved by a heartbeat every 5 seconds,
// observed by the observer of [SetObserver].
//
// # Connections and the cost per key
//
// Every statement on a connection costs the server more the more locks
// its session holds: at the end of each transaction, which every
// statement of a Locker is, PostgreSQL walks the session's local lock
// table, about 0.07 µs a lock. So a connection carries up to KeysPerConn
// leases (1,000) before the Locker opens another, within MaxConns, and
// the server's cost of a statement stays about what it is at 1,000 locks.
// The default MaxConns of 4 holds 4,000 leases so; beyond them the leases
// spread evenly over the 4 connections, and every acquisition and release
// costs more with the leases each carries: 50,000 leases on 4
// connections took about 5 times as long per key as 10,000
// (docs/locker.md). To hold n leases at about the cost of the first
// thousand, set MaxConns to n/1,000 (100 for 100,000), and leave room for
// it in db's SetMaxOpenConns and in the server's max_connections. Each
// connection is a backend, and counts its locks in pg_locks once every
// twelve heartbeats (the connections taking turns), which copies the
// server's whole lock table: many connections at many leases cost the
// server connections × leases a minute.
//
// The first 4 connections open as soon as each holds a lease, and
// another when fewer than 4 of those open have room and each is busy with
// a statement. So new keys go to 4 connections at a time whatever
// MaxConns is, and leases taken together are released together: the
// releases that queue on a connection go in one statement.
type LockerConfig struct {
	// MaxConns is how many connections the Locker holds its leases on,
	// at most; 0 is the default of 4, which holds 4,000 leases at the
	// cost per key of the first thousand.
	MaxConns int
	// KeysPerConn is how many leases a connection carries before the
	// Locker opens another for new keys, while fewer than MaxConns are
	// open; 0 is the default of 1,000. It is a bound on when to open,
	// not on what a connection holds: with MaxConns connections open,
	// each carries as many as it must.
	KeysPerConn int
	// Heartbeat is the interval of each connection's heartbeat, as for
	// [Heartbeat]; 0 is the default of 5 seconds.
	Heartbeat time.Duration
	// Observer observes the Locker's acquisitions and releases instead of
	// the observer of [SetObserver], as [WithObserver] does for one call;
	// nil keeps SetObserver's.
	Observer Observer
}

// NewLocker returns a Locker that holds leases on connections from db, as
// cfg says; the options of each lease go to [Locker.Acquire]. It opens no
// connection until the first acquisition. A negative MaxConns or
// KeysPerConn, or a Heartbeat other than 0 below a millisecond, is an
// error matching [ErrBadOption].
func NewLocker(db *sql.DB, cfg LockerConfig) (*Locker, error) {
	if db == nil {
		return nil, errNilDB
	}
	switch {
	case cfg.MaxConns < 0:
		return nil, fmt.Errorf("%w: LockerConfig.MaxConns (%d) must not be negative", scope.ErrBadOption, cfg.MaxConns)
	case cfg.KeysPerConn < 0:
		return nil, fmt.Errorf("%w: LockerConfig.KeysPerConn (%d) must not be negative", scope.ErrBadOption, cfg.KeysPerConn)
	case cfg.Heartbeat != 0 && cfg.Heartbeat < time.Millisecond:
		return nil, fmt.Errorf("%w: LockerConfig.Heartbeat (%v) must be at least a millisecond", scope.ErrBadOption, cfg.Heartbeat)
	}
	n := cfg.MaxConns
	if n == 0 {
		n = scope.DefaultMaxConns
	}
	beat := cfg.Heartbeat
	if beat == 0 {
		beat = scope.DefaultHeartbeat
	}
	var h scope.Hooks
	if cfg.Observer != nil {
		h = hooks{cfg.Observer}
	}
	return &Locker{m: scope.NewMux(scope.DBSource(db), n, cfg.KeysPerConn, beat, h), db: db}, nil
}

// Acquire takes a session lock on key on one of the Locker's connections,
// as [Lock] does, or as its options say ([Try], [Wait], [WaitSlice],
// [Shared], [WithObserver]), and returns the lease that holds it;
// [Fencing] gives it a token. The lock is released
// by [Lease.Release], by [Locker.Close], or when the lease is lost. ctx
// bounds the acquisition only; the lease outlives it, and its context
// keeps ctx's values.
//
// When the lock is not granted the error matches [ErrNotAcquired],
// [ErrLockTimeout] (Wait bounds the whole acquisition: the turn on a
// connection, a new connection, and the wait), [ErrLockTableFull],
// [ErrLockerClosed], or ctx.Err(); a server that is a hot standby gives
// [ErrStandby], a connection found shared with other clients, as behind a
// transaction pooler, [ErrSharedSession] (a pooler that sends every
// statement to one backend goes undetected, as for [Acquire]; an open
// Locker's connections mark their backends, so that other clients of the
// pooler are refused there until [Locker.Close]), and connections lost
// under the acquisition three times in a row [ErrLockLost]. Any other
// error from the server comes back as it is, and the connection goes on;
// a role that may not use the fencing sequence gets the driver's error
// wrapped in one that names the privilege, as [Fencing] says. On any
// error, nothing is held.
//
// [Lease.Release] on the lease waits for its connection's turn even when
// its ctx has ended, so that a cancelled caller still releases: each
// statement on the connection is bounded by the heartbeat interval.
// Releases that arrive while a statement is in flight on their connection
// go together in its next statement, one round trip for all their keys;
// each returns once its own key is released.
// Acquire waits for its statement too, however soon ctx ends, so that the
// connection and the other leases on it are never left in doubt: on a
// server that stops answering, it returns within the later of ctx's
// deadline and the heartbeat interval, plus [AbortMargin], and the
// connection, with every lease on it, is given up (an acquisition whose
// ctx is still live goes on to another connection).
func (lk *Locker) Acquire(ctx context.Context, key Key, opts ...LockerOption) (*Lease, error) {
	o, err := parse(opts)
	if err != nil {
		return nil, err
	}
	l, err := lk.m.Acquire(ctx, key.sql(), &o)
	if err != nil {
		return nil, explainFencing(ctx, lk.db, &o, err)
	}
	return &Lease{key: key, l: l}, nil
}

// Close releases every lease the Locker holds, with one statement per
// connection, and returns its connections to the pool. The leases'
// contexts are cancelled, and their Err reports [context.Canceled], as
// after [Lease.Release]. Acquisitions still waiting, and later ones,
// fail with [ErrLockerClosed].
// When ctx ends first, or a connection does not answer, its session is
// closed instead, which releases its locks as well.
func (lk *Locker) Close(ctx context.Context) error { return lk.m.Close(ctx) }
