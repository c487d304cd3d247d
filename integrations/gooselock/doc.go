// Package gooselock provides lockers for goose (github.com/pressly/goose/v3)
// that hold goose's migration lock as a pgadvisory lease: a session lock
// with a heartbeat that finds a lost lock within two intervals, a wait that
// holds no snapshot, and a session in doubt closed rather than pooled.
//
// # Two lockers
//
// [SessionLocker] is a goose lock.SessionLocker (goose.WithSessionLocker).
// It takes the lock on the connection goose runs the migrations on, so the
// lock and the migrations share one session: a lost lock ends the
// migration there.
//
//	locker, err := gooselock.NewSessionLocker(gooselock.DefaultKey, gooselock.Heartbeat(2*time.Second))
//	if err != nil {
//		return err
//	}
//	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations,
//		goose.WithSessionLocker(locker))
//	if err != nil {
//		return err
//	}
//	ctx, cancel := gooselock.CancelOnLoss(ctx)
//	defer cancel()
//	_, err = provider.Up(ctx)
//
// [Locker] is a goose lock.Locker (goose.WithLocker). It takes the lock on a
// connection of its own ([advisory.Acquire]), so its heartbeat runs beside
// a long statement rather than after it, at the cost of one connection
// more; a loss reaches the migrations only through their context.
//
// # What a loss does
//
// goose runs every migration under the context given to the Provider's
// method, and gives a locker no way to change it. [CancelOnLoss] wraps
// that context so that the locker can cancel it: the statement in flight
// is cancelled, a migration's transaction rolls back, and goose returns an
// error. Without it, only the session the lock is on ends with the loss,
// and only Unlock reports it. Either way the Provider's method returns an
// error matching [advisory.ErrLockLost]. docs/migrations.md says what each
// kind of migration sees.
//
// # The key
//
// [DefaultKey] is the key goose's own PostgreSQL locker takes, so that
// instances that run goose's locker and instances that run this package's
// exclude each other while a fleet moves from one to the other. Any
// [advisory.Key] will do; all the instances that migrate one database must
// use the same.
package gooselock
