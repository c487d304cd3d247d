package advisory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A Lease is a session lock that knows when it is lost: it holds the lock
// on a connection of its own, and a heartbeat proves, every interval, that
// this backend is still the lease\'s own session, which keeps
// its lock (every twelfth beat also finds the lock in pg_locks). Its [Lease.Context] is cancelled the
// moment the lease is lost or released, so work done under the lock stops
// with it:
//
//	l, err := advisory.Acquire(ctx, db, key, advisory.Heartbeat(2*time.Second))
//	if err != nil {
//		return err
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	return work(l.Context())
//
// A loss is signalled within two heartbeat intervals of the event that
// caused it: the holder's backend terminated, the server restarted, the
// server or network frozen (the heartbeat gets no answer within its
// interval, and the lease gives itself up), or the session ended by
// idle_session_timeout. Between the event and its detection another
// holder may already hold the key; that is what fencing tokens
// ([Fencing], [Lease.Token]) are for.
//
// A Lease from [Acquire] costs one connection from the pool, held until
// Release or a loss, and one goroutine, which ends with it. Acquire costs
// two round trips (on pgx up to four on a connection's first lease, since
// pgx prepares the lock statement and the confirming one, which carry the
// key as parameters, once per connection), each heartbeat one, and
// Release one. A Lease from a [Locker] shares its
// connection and heartbeat with many others.
type Lease struct {
	key Key
	l   holder
}

// holder is what holds a lease's lock: a connection of the lease's own
// ([Acquire], [Watch]), or a connection it shares with others ([Locker]).
type holder interface {
	Context() context.Context
	Err() error
	Token() int64
	Release(ctx context.Context) error
}

var (
	_ holder = (*scope.Lease)(nil)
	_ holder = (*scope.MuxLease)(nil)
)

// Acquire takes a session lock on key on a connection of its own from db,
// as [Lock] does (or as [Try], [Wait] and [Shared] say), and returns
// the lease that holds it. The lock is released by [Lease.Release], or when
// the lease is lost. ctx bounds the acquisition only; the lease outlives
// it, and its context keeps ctx's values.
//
// Besides the lock statement, Acquire sends one statement that confirms
// this backend holds the key, takes the fencing token when [Fencing] asks
// for one, and refuses what cannot work: a hot standby, where advisory
// locks coordinate nothing with the primary (the error names it), and a
// session that shares its backend with other clients, as behind a
// transaction pooler such as PgBouncer in transaction mode (the error says
// so, and the error matches [ErrSharedSession]). A pooler is caught at
// Acquire when the statement lands on another backend, or on one that
// another client's lease has marked; otherwise the first heartbeat that
// lands on another backend reports the lease lost, and the lease's lock
// and mark are cleared on its backend, or that backend is ended from
// another. A pooler that sends every statement to the lease's backend (a
// pool of one) cannot be detected, and clients that are not this library
// can take the key there: do not take leases through a transaction
// pooler. Use [WithXactLock], or connect directly or through a
// session-mode pool (docs/leases.md, "Through a transaction pooler").
//
// When the lock is not granted the error matches [ErrNotAcquired],
// [ErrLockTimeout], [ErrDeadlock], or ctx.Err(). On any error, nothing is
// held: a session in doubt is closed. On a server that stops answering,
// Acquire returns within ctx's deadline plus [AbortMargin]; a heartbeat
// that gets no answer within its interval reports the lease lost and
// closes the session AbortMargin later.
func Acquire(ctx context.Context, db *sql.DB, key Key, opts ...LeaseOption) (*Lease, error) {
	if db == nil {
		return nil, errNilDB
	}
	o, err := parse(opts)
	if err != nil {
		return nil, err
	}
	l, err := acquireLease(ctx, db, key.sql(), &o)
	if err != nil {
		return nil, explainFencing(ctx, db, &o, err)
	}
	return &Lease{key: key, l: l}, nil
}

// A WatchConfig says how [Watch] watches a lock. Its zero value watches
// an exclusive lock with the default heartbeat, and takes no token.
type WatchConfig struct {
	// Shared says the lock is shared.
	Shared bool
	// Heartbeat is the interval of the lease's heartbeat, as for
	// [Heartbeat]; 0 is the default of 5 seconds.
	Heartbeat time.Duration
	// Fencing takes a fencing token, as [Fencing] does for [Acquire].
	Fencing bool
	// Observer observes the lease instead of the observer of
	// [SetObserver], as [WithObserver] does; nil keeps SetObserver's.
	Observer Observer
}

// Watch turns the session lock that conn holds on key into a [Lease], for
// a lock taken some other way than [Acquire], such as one of several keys
// tried at once. It takes over conn: the lease's heartbeat runs on it, and
// [Lease.Release] releases every session lock on conn and closes it (or
// discards the session when in doubt); cfg says whether the lock is
// shared, the heartbeat, and whether to take a fencing token. It costs one
// round trip, which confirms the lock as Acquire's does (on pgx two on a
// connection's first lease, which prepares the statement); on any error
// the session is discarded, the lock with it, and conn is closed.
func Watch(ctx context.Context, conn *sql.Conn, key Key, cfg WatchConfig) (*Lease, error) {
	if conn == nil {
		return nil, errNilConn
	}
	o := scope.Options{Shared: cfg.Shared, Fencing: cfg.Fencing, Heartbeat: cfg.Heartbeat}
	if cfg.Observer != nil {
		o.Hooks = hooks{cfg.Observer}
	}
	var err error
	if cfg.Heartbeat != 0 {
		o.Watched = true
		err = o.Check()
	}
	if err != nil {
		scope.Discard(conn)
		_ = conn.Close()
		return nil, err
	}
	l, err := scope.StartLease(ctx, conn, key.sql(), &o, scope.ConnForm(conn), true)
	if err != nil {
		return nil, explainFencing(ctx, nil, &o, err)
	}
	return &Lease{key: key, l: l}, nil
}

func acquireLease(ctx context.Context, db *sql.DB, key sqltext.Key, o *scope.Options) (*scope.Lease, error) {
	for try := 1; ; try++ {
		l, err := acquireOnce(ctx, db, key, o)
		// driver.ErrBadConn means the driver sent nothing: the pooled
		// session had died, as when its backend was terminated while
		// idle. Nothing was taken on it.
		if err == nil || try == scope.BadConnTries || !errors.Is(err, driver.ErrBadConn) || ctx.Err() != nil {
			return l, err
		}
	}
}

func acquireOnce(ctx context.Context, db *sql.DB, key sqltext.Key, o *scope.Options) (*scope.Lease, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, scope.Fail(ctx, "connect", key.String(), err)
	}
	form := scope.ConnForm(conn)
	op := o.LockOp(false)
	acquired, err := scope.Take(ctx, o.Observed(), scope.SQLConn(conn), op, []sqltext.Key{key}, o, form)
	if err == nil && o.Try && !acquired {
		err = scope.FailKind(op, key.String(), ErrNotAcquired, nil)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	lo := *o
	lo.Spare = scope.DBSource(db) // to undo the lock after a loss that closed conn
	return scope.StartLease(ctx, conn, key, &lo, form, true)
}

// Key returns the key the lease holds.
func (l *Lease) Key() Key { return l.key }

// Context returns a context that is cancelled the moment the lease is lost
// or released. context.Cause(l.Context()) then returns [Lease.Err]'s loss,
// or an error saying the lease was released.
func (l *Lease) Context() context.Context { return l.l.Context() }

// Done returns a channel that is closed when the lease is lost or
// released, as [context.Context.Done] does.
func (l *Lease) Done() <-chan struct{} { return l.l.Context().Done() }

// Err returns nil while the lease holds its lock. After a loss it returns
// an error matching [ErrLockLost] whose cause (the driver's error, or what
// the heartbeat found) stays reachable with [errors.As] and [errors.Is];
// after [Lease.Release] it returns [context.Canceled].
func (l *Lease) Err() error { return l.l.Err() }

// Token returns the lease's fencing token, or 0 when [Fencing] was not
// given. Tokens strictly increase across successive holders of a key,
// across crashes of the server and across promotions of a standby: a
// resource that records the highest token it has seen can refuse a write
// from a holder whose lease was lost. A token is the server's timeline
// above bit 40 and a counter below ([SplitToken]).
func (l *Lease) Token() int64 { return l.l.Token() }

// Release stops the heartbeat, releases the lock and returns the
// connection to the pool. It is idempotent: later calls return the first
// result. It returns an error matching [ErrLockLost] if the lease was lost
// before it; the lock is gone either way. It runs even when ctx has
// ended, as [Unlock] does: it waits for a heartbeat in flight, which the
// heartbeat's own deadline bounds, then releases under ctx's values
// without its cancellation, giving up after ten seconds (plus
// [AbortMargin] on a server that stops answering, whose session is then
// closed).
func (l *Lease) Release(ctx context.Context) error { return l.l.Release(ctx) }

// Heartbeat sets the interval of a lease's heartbeat to d, for [Acquire],
// and makes [WithSessionLock] and [WithSessionLockConn] hold their lock as
// a lease: fn then runs with a context that a loss cancels, and the scope
// returns an error matching [ErrLockLost] even if fn returns nil. Each
// heartbeat must be answered within d, so a loss is signalled within 2d.
// The default, for Acquire, is 5 seconds. d must be at least a
// millisecond.
//
// While fn's own statement runs on the scope's connection, the heartbeat
// waits for it, and the statement itself reports a lost session; bound
// fn's statements with ctx or statement_timeout, since a frozen server
// stalls both.
func Heartbeat(d time.Duration) SessionOption {
	return sessionOption(func(o *scope.Options) { o.Heartbeat, o.Watched = d, true })
}

// Fencing makes [Acquire] and [Locker.Acquire] take a fencing token, [Lease.Token], in the same
// statement that confirms the lock. Tokens come from the sequence
// pgadvisory.fencing_token, one per database whatever the session's
// search_path. The first token taken on a database creates the schema
// pgadvisory and the sequence, which needs CREATE on the database;
// later ones need USAGE on the schema and on the sequence. A role that
// lacks one gets an error (the driver's, SQLSTATE 42501, wrapped) that
// names the privilege and what an administrator can run instead. The
// sequence starts after the greatest value of any pgadvisory_fencing_token,
// the sequence of earlier releases, that the role may read.
//
// A token is durable before it is handed out: the statement that draws it
// makes its own transaction's commit wait for the WAL flush when
// synchronous_commit is off (for the session, role or server), so a crash
// cannot hand it out again; the session's setting is the same after it.
// Watch inside a transaction block of the caller's is the exception: the
// setting lasts until the block ends, and the token is durable once the
// block commits, not before. A token begins with the server's timeline,
// which grows at every promotion, so a promoted standby's tokens are
// greater than every token of the primary it replaced, even those whose
// WAL it never received ([SplitToken]). The draw after 2^40-1 tokens on a
// database fails rather than wrap. [WatchConfig] has a field of the
// same name.
func Fencing() LockerOption { return lockerOption(setFencing) }

// setFencing is Fencing's setting.
func setFencing(o *scope.Options) { o.Fencing = true }
