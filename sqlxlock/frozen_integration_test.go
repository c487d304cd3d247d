package sqlxlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/sqlxlock"
)

// TestFrozenServerIntegration checks that the scopes return at ctx's
// deadline when the server stops answering, on both drivers, as
// advisory's do: lib/pq does not watch ctx while it sends BEGIN, so the
// BEGIN of sqlxlock's WithXactLock runs under advisory's watchdog too. A
// call that waited for the thaw would still be running when the test
// thaws the gate, long after its deadline.
func TestFrozenServerIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		for _, c := range []struct {
			name string
			call func(ctx context.Context, db *sqlx.DB) error
		}{
			{"WithXactLock", func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithXactLock(ctx, db, advisory.PairKey(0x7f23, 1), func(context.Context, *sqlx.Tx) error { return nil })
			}},
			{"WithSessionLock", func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithSessionLock(ctx, db, advisory.PairKey(0x7f23, 2), func(context.Context, *sqlx.Conn) error { return nil })
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				gate := tg.Server.Gate(t)
				under := gate.Server(t, tg.Server).Open(t, tg.Driver)
				under.SetMaxOpenConns(1)
				under.SetMaxIdleConns(1)
				if err := under.Ping(); err != nil {
					t.Fatal(err)
				}
				db := sqlxDB(pgtest.Target{Server: tg.Server, Driver: tg.Driver, DB: under})
				gate.Freeze()
				done := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					done <- c.call(ctx, db)
				}()
				select {
				case err := <-done:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s on a frozen server: %v, want an error matching context.DeadlineExceeded", c.name, err)
					}
				case <-time.After(30 * time.Second):
					gate.Thaw()
					<-done
					t.Fatalf("%s on a frozen server returned only when the server answered again", c.name)
				}
				gate.Thaw()
			})
		}
	})
}
