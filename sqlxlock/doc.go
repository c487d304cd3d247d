// Package sqlxlock provides the scoped advisory-lock helpers of package
// advisory for codebases built on github.com/jmoiron/sqlx: fn receives a
// *sqlx.Tx or a *sqlx.Conn, with the driver name, mapper and unsafe flag of
// the *sqlx.DB it came from, so that Get, Select, NamedExec and Rebind work
// inside the lock as they do everywhere else.
//
// # Scoped helpers
//
// [WithXactLock] runs fn in a transaction that holds a transaction lock, and
// [WithSessionLock] runs fn on a dedicated connection that holds a session
// lock:
//
//	db := sqlx.NewDb(sqlDB, "pgx")
//	err := sqlxlock.WithXactLock(ctx, db, advisory.NameKey(7, "invoices"),
//		func(ctx context.Context, tx *sqlx.Tx) error {
//			var due []Invoice
//			if err := tx.SelectContext(ctx, &due, "SELECT * FROM invoices WHERE due < now()"); err != nil {
//				return err
//			}
//			_, err := tx.NamedExecContext(ctx, "INSERT INTO runs (started) VALUES (:started)", run)
//			return err
//		}, advisory.Try())
//	if errors.Is(err, advisory.ErrNotAcquired) {
//		return nil // another process is on it
//	}
//
// That is the whole difference from advisory: the helpers begin the
// transaction with db.BeginTxx (or take the connection with db.Connx), so
// fn gets exactly the value sqlx builds, and hand the embedded *sql.Tx (or
// *sql.Conn) to the very scope code behind [advisory.WithXactLock] and
// [advisory.WithSessionLock]. What a scope guarantees, which options it
// takes and which errors it returns are documented there once.
//
// # Lock functions
//
// This package has no lock functions of its own. *sqlx.Tx embeds *sql.Tx and
// *sqlx.Conn embeds *sql.Conn, so a caller holding one passes the embedded
// value to advisory, and copies of advisory's functions would only be a
// second name for the same thing:
//
//	tx, err := db.BeginTxx(ctx, nil)
//	...
//	ok, err := advisory.TryXactLock(ctx, tx.Tx, key) // released at tx.Commit or tx.Rollback
//
//	conn, err := db.Connx(ctx)
//	...
//	err = advisory.Lock(ctx, conn.Conn, key) // held until advisory.Unlock or the session ends
//
// fn must not keep tx or conn after returning: the transaction ends, and
// the connection goes back to the pool or is closed.
package sqlxlock
