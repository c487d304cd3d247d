package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// DriverPGXPool is the driver name with which [OpenExample] opens the
// *sql.DB of a program on pgx's own API: stdlib.OpenDBFromPool on a
// *pgxpool.Pool from [OpenExamplePool]. Only OpenExample takes it;
// [Server.Open] and [Each] do not.
const DriverPGXPool = "pgxpool"

// Launch gives a runnable example program a PostgreSQL without a
// testing.TB. It returns DATABASE_URL when that is set, with a stop that
// does nothing. Otherwise it follows the order the package documentation
// gives, starting only the first configured image: the first server of
// PGADVISORY_TEST_DSN, a container of the first image of
// PGADVISORY_TEST_IMAGES, or a cluster from local binaries. The caller must
// call stop, which removes what Launch started. Launch prints nothing.
func Launch(ctx context.Context) (dsn string, stop func(), err error) {
	if dsn := os.Getenv(envExample); dsn != "" {
		return dsn, func() {}, nil
	}
	r := start(ctx, nil, true, false)
	if r.err != nil {
		return "", nil, fmt.Errorf("pgtest: %w", r.err)
	}
	return r.servers[0].DSN, r.stop, nil
}

// OpenExample opens the database an example program runs against, with
// driver DriverPQ, DriverPGX or DriverPGXPool: DATABASE_URL when it is
// set, or else a disposable server from [Launch], announced on w before it
// starts. It checks the server answers and returns a description of it
// for the program's first line, such as "PostgreSQL 17.2 (disposable
// server)". close closes db and removes any server Launch started; with
// DriverPGXPool it closes the pool too.
func OpenExample(ctx context.Context, driver string, w io.Writer) (db *sql.DB, about string, close func(), err error) {
	switch driver {
	case DriverPQ, DriverPGX:
	case DriverPGXPool:
		pool, about, closePool, err := OpenExamplePool(ctx, w, nil)
		if err != nil {
			return nil, "", nil, err
		}
		// What a program on pgx's own API writes to run a recipe:
		// database/sql over the pool's own connections. Closing db
		// leaves the pool open.
		db := stdlib.OpenDBFromPool(pool)
		return db, about, func() {
			db.Close()
			closePool()
		}, nil
	default:
		return nil, "", nil, fmt.Errorf("pgtest: driver %q: want %q, %q or %q", driver, DriverPQ, DriverPGX, DriverPGXPool)
	}
	dsn, where, stop, err := exampleDSN(ctx, w)
	if err != nil {
		return nil, "", nil, err
	}
	if db, err = openDB(driver, dsn); err != nil {
		stop()
		return nil, "", nil, err
	}
	close = func() {
		db.Close()
		stop()
	}
	var version string
	if err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&version); err != nil {
		close()
		return nil, "", nil, fmt.Errorf("pgtest: connect: %w", err)
	}
	return db, "PostgreSQL " + version + " (" + where + ")", close, nil
}

// OpenExamplePool is [OpenExample] for a program on pgx's own API: it
// opens a *pgxpool.Pool on the same database, after edit (which may be
// nil) has changed the pool's configuration. close closes the pool and
// removes any server Launch started.
func OpenExamplePool(ctx context.Context, w io.Writer, edit func(*pgxpool.Config)) (pool *pgxpool.Pool, about string, close func(), err error) {
	dsn, where, stop, err := exampleDSN(ctx, w)
	if err != nil {
		return nil, "", nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("pgtest: %w", err)
	}
	if edit != nil {
		edit(cfg)
	}
	if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("pgtest: %w", err)
	}
	close = func() {
		pool.Close()
		stop()
	}
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		close()
		return nil, "", nil, fmt.Errorf("pgtest: connect: %w", err)
	}
	return pool, "PostgreSQL " + version + " (" + where + ")", close, nil
}

// exampleDSN returns the DSN an example runs against, DATABASE_URL or a
// disposable server's, where it comes from, and stop, which removes what
// it started.
func exampleDSN(ctx context.Context, w io.Writer) (dsn, where string, stop func(), err error) {
	if dsn = os.Getenv(envExample); dsn != "" {
		return dsn, "DATABASE_URL", func() {}, nil
	}
	fmt.Fprintln(w, "starting a disposable PostgreSQL (DATABASE_URL is not set)...")
	if dsn, stop, err = Launch(ctx); err != nil {
		return "", "", nil, fmt.Errorf("%w\nSet DATABASE_URL to a postgres:// URL to use an existing server", err)
	}
	return dsn, "disposable server", stop, nil
}
