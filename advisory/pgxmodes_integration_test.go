package advisory_test

import (
	"context"
	"database/sql"
	"math"
	"net/url"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

// TestPgxExecModesIntegration runs the calls that send their key as a
// parameter on pgx in each of pgx's query modes, with the keys at the ends
// of both key spaces, and checks through another session that the lock
// taken is the key's own: a statement pgx prepares, describes, runs
// unnamed or writes out on the client must all take the same lock.
func TestPgxExecModesIntegration(t *testing.T) {
	keys := []advisory.Key{
		advisory.Int64Key(math.MinInt64), advisory.Int64Key(math.MaxInt64), advisory.Int64Key(-1),
		advisory.PairKey(math.MinInt32, math.MaxInt32), advisory.PairKey(-1, 0),
	}
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) {
			other := pgtest.Conn(t, s.Open(t, pgtest.DriverPQ))
			for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
				t.Run(mode, func(t *testing.T) {
					u, err := url.Parse(s.DSN)
					if err != nil {
						t.Fatal(err)
					}
					q := u.Query()
					q.Set("default_query_exec_mode", mode)
					u.RawQuery = q.Encode()
					db, err := sql.Open("pgx", u.String())
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					conn := pgtest.Conn(t, db)
					ctx := context.Background()
					for _, k := range keys {
						checkPgxSession(ctx, t, conn, other, k)
						err := advisory.WithXactLock(ctx, db, k, func(ctx context.Context, _ *sql.Tx) error {
							otx, err := other.BeginTx(ctx, nil)
							if err != nil {
								return err
							}
							defer otx.Rollback()
							if ok, err := advisory.TryXactLock(ctx, otx, k); err != nil || ok {
								t.Errorf("%v: another session's TryXactLock during WithXactLock = %v, %v; want false", k, ok, err)
							}
							return nil
						}, advisory.Try())
						if err != nil {
							t.Errorf("%v: WithXactLock: %v", k, err)
						}
					}
				})
			}
		})
	}
}

// checkPgxSession takes k on conn with TryLock, then with Lock stacked on
// it, checks that other cannot take it, and releases both.
func checkPgxSession(ctx context.Context, t *testing.T, conn, other *sql.Conn, k advisory.Key) {
	t.Helper()
	if ok, err := advisory.TryLock(ctx, conn, k); err != nil || !ok {
		t.Fatalf("%v: TryLock = %v, %v", k, ok, err)
	}
	if err := advisory.Lock(ctx, conn, k); err != nil {
		t.Fatalf("%v: Lock: %v", k, err)
	}
	if ok, err := advisory.TryLock(ctx, other, k); err != nil || ok {
		t.Errorf("%v: another session's TryLock = %v, %v; want false", k, ok, err)
	}
	for range 2 {
		if err := advisory.Unlock(ctx, conn, k); err != nil {
			t.Fatalf("%v: Unlock: %v", k, err)
		}
	}
	if ok, err := advisory.TryLock(ctx, other, k); err != nil || !ok {
		t.Errorf("%v: another session's TryLock after the unlocks = %v, %v; want true", k, ok, err)
	}
	if err := advisory.Unlock(ctx, other, k); err != nil {
		t.Fatal(err)
	}
}
