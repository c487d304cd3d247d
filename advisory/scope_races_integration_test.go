package advisory_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestSessionScopeTxLeftOpenConcurrentIntegration: many scopes at once
// whose fn leaves a transaction open on fn's context. Each ends its
// session while the transaction is open, then database/sql rolls the
// transaction back and closes the connection; the two must not race (a
// Raw call racing a Conn's close makes database/sql panic). Every scope
// reports the mistake, and no lock stays held.
func TestSessionScopeTxLeftOpenConcurrentIntegration(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		db := tg.Server.Open(t, tg.Driver)
		db.SetMaxOpenConns(8)
		var wg sync.WaitGroup
		for range 4 {
			ks := []advisory.Key{keys.next(), keys.next()}
			wg.Go(func() {
				for i := range 25 {
					err := advisory.WithSessionLock(context.Background(), db, ks[i%2], func(ctx context.Context, conn *sql.Conn) error {
						_, err := conn.BeginTx(ctx, nil)
						return err
					})
					if err == nil || !strings.Contains(err.Error(), "transaction still open") {
						t.Errorf("got %v; want an error saying fn left a transaction open", err)
						return
					}
				}
			})
			t.Cleanup(func() {
				for _, k := range ks {
					pgtest.AwaitFree(t, tg.DB, k)
				}
			})
		}
		wg.Wait()
	})
}

// TestSessionScopeHeartbeatCtxEndsIntegration: a scope with a heartbeat
// whose ctx ends while fn runs still stops its heartbeat, releases its
// lock and returns its connection, whatever the order in which the two
// end.
func TestSessionScopeHeartbeatCtxEndsIntegration(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		db := tg.Server.Open(t, tg.Driver)
		for range 20 {
			key := keys.next()
			ctx, cancel := context.WithCancel(context.Background())
			_ = advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
				cancel()
				return nil
			}, advisory.Heartbeat(time.Hour))
			pgtest.AwaitFree(t, tg.DB, key)
			pgtest.Await(t, "every connection back in the pool after the scope returned", func() (bool, error) { return db.Stats().InUse == 0, nil })
		}
	})
}
