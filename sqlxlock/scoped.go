package sqlxlock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Errors for bad arguments.
var (
	errNilDB   = errors.New("sqlxlock: nil *sqlx.DB")
	errNilFunc = errors.New("sqlxlock: nil fn")
)

// WithXactLock is [advisory.WithXactLock] for a *sqlx.DB: fn receives the
// *sqlx.Tx that db.BeginTxx builds (or, where advisory begins on a
// connection of its own, as on lib/pq, the one that connection's BeginTxx
// builds), with db's driver name, mapper and unsafe flag. The scope is
// advisory's, run on db: the lock, its release at commit or rollback, the
// options, the errors and the bounds on a server that stops answering are
// the same.
func WithXactLock(ctx context.Context, db *sqlx.DB, key advisory.Key, fn func(ctx context.Context, tx *sqlx.Tx) error, opts ...advisory.XactOption) error {
	switch {
	case db == nil || db.DB == nil:
		return errNilDB
	case fn == nil:
		return errNilFunc
	}
	o, err := scope.ParseOf(opts)
	if err != nil {
		return err
	}
	p := &pool{db: db}
	return scope.WithXact(ctx, p, sqltext.KeyOf(key), func(ctx context.Context, _ *sql.Tx) error { return fn(ctx, p.tx) }, &o)
}

// WithSessionLock is [advisory.WithSessionLock] for a *sqlx.DB: fn
// receives the *sqlx.Conn that db.Connx builds, with db's driver name,
// mapper and unsafe flag. The scope is advisory's, run on db: the lock,
// its release when fn returns, the options (Heartbeat included) and the
// errors are the same.
func WithSessionLock(ctx context.Context, db *sqlx.DB, key advisory.Key, fn func(ctx context.Context, conn *sqlx.Conn) error, opts ...advisory.SessionOption) error {
	switch {
	case db == nil || db.DB == nil:
		return errNilDB
	case fn == nil:
		return errNilFunc
	}
	o, err := scope.ParseOf(opts)
	if err != nil {
		return err
	}
	p := &pool{db: db}
	return scope.WithSession(ctx, p, sqltext.KeyOf(key), func(ctx context.Context, _ *sql.Conn) error { return fn(ctx, p.conn) }, &o)
}

// pool hands advisory's scopes the connections and transactions of a
// *sqlx.DB, and keeps the sqlx values of the last ones it made, which
// are the ones the scope runs on.
type pool struct {
	db   *sqlx.DB
	conn *sqlx.Conn
	tx   *sqlx.Tx
}

func (p *pool) DB() *sql.DB { return p.db.DB }

func (p *pool) Conn(ctx context.Context) (*sql.Conn, error) {
	c, err := p.db.Connx(ctx)
	if err != nil {
		return nil, err
	}
	p.conn = c
	return c.Conn, nil
}

func (p *pool) BeginTx(ctx context.Context, conn *sql.Conn, opts *sql.TxOptions) (*sql.Tx, error) {
	var (
		tx  *sqlx.Tx
		err error
	)
	if conn != nil { // from Conn: p.conn is its sqlx value
		tx, err = p.conn.BeginTxx(ctx, opts)
	} else {
		tx, err = p.db.BeginTxx(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	p.tx = tx
	return tx.Tx, nil
}
