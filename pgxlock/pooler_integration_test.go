package pgxlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
