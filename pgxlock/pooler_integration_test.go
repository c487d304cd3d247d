package pgxlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// TestPoolerIntegration runs transaction scopes on one key from several
// pools through PgBouncer in transaction mode, in pgx's exec mode (an
// unnamed statement, which a pooler can carry): transaction locks work
// through it, and no two critical sections overlap.
func TestPoolerIntegration(t *testing.T) {
	const clients, each = 4, 25
	for _, srv := range pgtest.Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			bouncer := srv.PgBouncer(t, 2)
			key := randomKey()
			var inside, overlaps, entered atomic.Int64
			var wg sync.WaitGroup
			for range clients {
				pool := newPool(t, bouncer.DSN, func(cfg *pgxpool.Config) {
					cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
				})
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						err := pgxlock.WithXactLock(context.Background(), pool, key, func(context.Context, pgx.Tx) error {
							if inside.Add(1) > 1 {
								overlaps.Add(1)
							}
							entered.Add(1)
							time.Sleep(time.Millisecond)
							inside.Add(-1)
							return nil
						})
						if err != nil {
							t.Errorf("WithXactLock through PgBouncer: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("%d critical sections through PgBouncer, %d overlapped", entered.Load(), overlaps.Load())
			if overlaps.Load() != 0 || entered.Load() != clients*each {
				t.Errorf("%d of %d critical sections ran, %d overlapped; want all, and none", entered.Load(), clients*each, overlaps.Load())
			}
		})
	}
}

// TestStaleMarkPoolerIntegration leaves a stale mark, a lease's mark on a
// backend that holds no lock, on the one backend of a PgBouncer pool in
// transaction mode, where it would refuse every lock call until PgBouncer
// closed it: a transaction scope through the pooler removes it and runs
// fn once.
func TestStaleMarkPoolerIntegration(t *testing.T) {
	for _, srv := range pgtest.Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t, srv.PgBouncer(t, 1).DSN, func(cfg *pgxpool.Config) {
				cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
				cfg.MaxConns = 1
			})
			for i := range 3 {
				if _, err := pool.Exec(ctx, "SELECT pg_catalog.set_config('pgadvisory.lease', '424242', false)"); err != nil {
					t.Fatal(err)
				}
				runs := 0
				err := pgxlock.WithXactLock(ctx, pool, randomKey(), func(context.Context, pgx.Tx) error {
					runs++
					return nil
				}, advisory.Try())
				if err != nil || runs != 1 {
					t.Errorf("scope %d on a pooled backend with a stale mark: %v, fn ran %d times; want nil, once", i, err, runs)
				}
				var mark string
				if err := pool.QueryRow(ctx, "SELECT pg_catalog.current_setting('pgadvisory.lease', true)").Scan(&mark); err != nil {
					t.Fatal(err)
				}
				if mark != "" {
					t.Errorf("scope %d: the pooled backend bears %q after it; want no mark", i, mark)
				}
			}
		})
	}
}
