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
// *sqlx.Tx that db.BeginTxx builds, with db's driver name, mapper and
// unsafe flag. The lock, its release at commit or rollback, the options and
// the errors are advisory's, unchanged.
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
	tx, err := db.BeginTxx(ctx, o.TxOpts)
	if err != nil {
		return scope.Fail(ctx, "begin", "", err)
	}
	return scope.Xact(ctx, tx.Tx, true, sqltext.KeyOf(key), func(ctx context.Context, _ *sql.Tx) error { return fn(ctx, tx) }, &o, scope.DBForm(db.DB))
}

// WithSessionLock is [advisory.WithSessionLock] for a *sqlx.DB: fn
// receives the *sqlx.Conn that db.Connx builds, with db's driver name,
// mapper and unsafe flag. The lock, its release when fn returns, the
// options (Heartbeat included) and the errors are advisory's, unchanged.
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
	conn, err := db.Connx(ctx)
	if err != nil {
		return scope.Fail(ctx, "connect", "", err)
	}
	// The scope owns conn: it releases every session lock fn took and
	// closes conn, or discards the session when in doubt.
	return scope.Session(ctx, conn.Conn, sqltext.KeyOf(key), func(ctx context.Context, _ *sql.Conn) error { return fn(ctx, conn) }, &o, true)
}
