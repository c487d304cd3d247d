package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// openPool opens a pgx pool of at most maxConns connections on the
// database the program runs against: DATABASE_URL when it is set, or else
// a disposable server from [pgtest.Launch], announced on w before it
// starts. It returns a description of the server for the program's first
// line, such as "PostgreSQL 17.2 (disposable server)", and a close that
// closes the pool and removes any server Launch started. In a program of
// your own, pgxpool.New(ctx, os.Getenv("DATABASE_URL")) is all of it.
func openPool(ctx context.Context, w io.Writer, maxConns int32) (pool *pgxpool.Pool, about string, close func(), err error) {
	where, stop := "DATABASE_URL", func() {}
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprintln(w, "starting a disposable PostgreSQL (DATABASE_URL is not set)...")
		if dsn, stop, err = pgtest.Launch(ctx); err != nil {
			return nil, "", nil, fmt.Errorf("%w\nSet DATABASE_URL to a postgres:// URL to use an existing server", err)
		}
		where = "disposable server"
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		stop()
		return nil, "", nil, err
	}
	cfg.MaxConns = maxConns
	if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		stop()
		return nil, "", nil, err
	}
	close = func() {
		pool.Close()
		stop()
	}
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		close()
		return nil, "", nil, fmt.Errorf("connect: %w", err)
	}
	return pool, "PostgreSQL " + version + " (" + where + ")", close, nil
}
