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
// Both are thin: they begin the transaction with db.BeginTxx (or take the
// connection with db.Connx), so fn gets exactly the value sqlx itself
// builds, and hand its embedded *sql.Tx (or *sql.Conn) to advisory's own
// scope code ([advisory.WithXactLockTx], or the scope behind
// [advisory.WithSessionLock]), which takes the lock, runs fn and ends the
// scope. Every guarantee is advisory's, unchanged: the lock is released
// however fn ends, a panic rolls back (or closes the session) before it
// continues, no session lock ever stays behind in the pool, the options are
// advisory's [advisory.Option] values, and the errors are advisory's, to
// match with [errors.Is] against [advisory.ErrNotAcquired],
// [advisory.ErrLockTimeout] and the rest.
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
