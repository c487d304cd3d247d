package scope

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A Pool is where a scope that owns its session takes it: a *sql.DB, or a
// wrapper of one, such as sqlx's, whose connections and transactions carry
// more than database/sql's. The scope ends what it takes: it commits or
// rolls back the transaction, and closes the connection or discards its
// session.
type Pool interface {
	// DB returns the *sql.DB under the pool, whose driver chooses the
	// statement form and whether BEGIN is watched.
	DB() *sql.DB
	// Conn takes a connection, as (*sql.DB).Conn does.
	Conn(ctx context.Context) (*sql.Conn, error)
	// BeginTx begins a transaction on conn, a connection from Conn, or on
	// the pool itself when conn is nil.
	BeginTx(ctx context.Context, conn *sql.Conn, opts *sql.TxOptions) (*sql.Tx, error)
}

// DBPool is the Pool of a *sql.DB.
type DBPool struct{ Pool *sql.DB }

// DB returns p's *sql.DB.
func (p DBPool) DB() *sql.DB { return p.Pool }

// Conn takes a connection from p's *sql.DB.
func (p DBPool) Conn(ctx context.Context) (*sql.Conn, error) { return p.Pool.Conn(ctx) }

// BeginTx begins a transaction on conn, or on p's *sql.DB when conn is nil.
func (p DBPool) BeginTx(ctx context.Context, conn *sql.Conn, opts *sql.TxOptions) (*sql.Tx, error) {
	if conn != nil {
		return conn.BeginTx(ctx, opts)
	}
	return p.Pool.BeginTx(ctx, opts)
}

// WithXact is the whole of a transaction scope that begins its own
// transaction, as advisory.WithXactLock: it begins one on p as o says
// ([BeginTx]), and runs [Xact] on it, in the form p's driver runs
// fastest. A scope refused for a stale mark on its backend, before fn
// ran, removes the mark through another connection of p's and begins
// again, once (see guard.go).
func WithXact(ctx context.Context, p Pool, key sqltext.Key, fn func(context.Context, *sql.Tx) error, o *Options) error {
	ran := false
	once := func(ctx context.Context, tx *sql.Tx) error {
		ran = true
		return fn(ctx, tx)
	}
	err := withXact(ctx, p, key, once, o)
	if !ran && refusedForMark(ctx, err) && healPool(ctx, p) {
		err = withXact(ctx, p, key, once, o)
	}
	return err
}

// withXact is one try of [WithXact].
func withXact(ctx context.Context, p Pool, key sqltext.Key, fn func(context.Context, *sql.Tx) error, o *Options) error {
	tx, end, err := BeginTx(ctx, p, o.TxOpts)
	if err != nil {
		return FailBegin(ctx, key.String(), err)
	}
	defer end()
	return Xact(ctx, tx, true, key, fn, o, DBForm(p.DB()))
}

// WithSession is the whole of a session scope that takes its own
// connection, as advisory.WithSessionLock: it takes one from p and runs
// [SessionScope] on it, which owns it.
func WithSession(ctx context.Context, p Pool, key sqltext.Key, fn func(context.Context, *sql.Conn) error, o *Options) error {
	conn, err := p.Conn(ctx)
	if err != nil {
		return Fail(ctx, "connect", "", err)
	}
	return SessionScope(ctx, conn, key, fn, o, true)
}
