// Package migratelock provides a golang-migrate (github.com/golang-migrate/migrate/v4)
// database driver that runs another driver's migrations under a pgadvisory
// lease instead of that driver's own lock: a session lock with a heartbeat
// that finds a lost lock within two intervals, a bounded wait that holds no
// snapshot, and a session in doubt closed rather than pooled.
//
// # Use
//
// Wrap migrate's postgres driver (or any database.Driver on a PostgreSQL
// database) with [WithInstance], and give the wrapper to migrate:
//
//	inner, err := postgres.WithInstance(db, &postgres.Config{})
//	if err != nil {
//		return err
//	}
//	drv, err := migratelock.WithInstance(inner, db, &migratelock.Config{
//		Key:         migratelock.PostgresKey("app", "public", "schema_migrations"),
//		LockTimeout: 5 * time.Minute,
//	})
//	if err != nil {
//		return err
//	}
//	m, err := migrate.NewWithDatabaseInstance("file://migrations", "postgres", drv)
//	if err != nil {
//		return err
//	}
//	m.LockTimeout = 6 * time.Minute // above the Config's, so the Driver gives up first
//	defer m.Close()
//	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
//		return err
//	}
//
// # No context
//
// migrate's Driver interface has no context: Lock() and Unlock() take
// none. So [Config.LockTimeout] bounds the wait, and a loss of the lease
// cannot cancel the migration that runs: the wrapper refuses the next Run
// and SetVersion instead, and Unlock reports the loss, with errors matching
// advisory.ErrLockLost; m.Up() then returns them. A migration during which
// the lease was lost stays marked dirty. [Config.OnLoss] tells the caller
// at once, for example to send m.GracefulStop.
package migratelock
