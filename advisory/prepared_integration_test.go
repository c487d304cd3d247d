package advisory_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestPreparedStatementsIntegration proves that a key never makes a
// statement of its own: after 300 rounds of session and transaction locks
// with fresh keys on one connection, in transactions the caller began and
// in WithXactLock's, pgx holds one prepared statement per kind of call,
// with the key as a parameter, and lib/pq none. A transaction the caller
// began sends its key in the text, in the simple protocol, which pgx does
// not prepare.
func TestPreparedStatementsIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		conn := pgtest.Conn(t, tg.DB)
		for range 300 {
			for _, k := range []advisory.Key{keys.next(), keys.nextPair()} {
				if ok, err := advisory.TryLock(ctx, conn, k); err != nil || !ok {
					t.Fatalf("TryLock(%v) = %v, %v", k, ok, err)
				}
				if err := advisory.Unlock(ctx, conn, k); err != nil {
					t.Fatal(err)
				}
				// A free key's wait is its try, the statement TryLock
				// sends.
				if err := advisory.Lock(ctx, conn, k); err != nil {
					t.Fatalf("Lock(%v) = %v", k, err)
				}
				if err := advisory.Unlock(ctx, conn, k); err != nil {
					t.Fatal(err)
				}
			}
			// A transaction the caller began sends its key in the text:
			// database/sql cannot say which driver runs it.
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryXactLock(ctx, tx, keys.next()); err != nil || !ok {
				t.Fatalf("TryXactLock = %v, %v", ok, err)
			}
			if err := advisory.XactLockShared(ctx, tx, keys.nextPair()); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			// A transaction that WithXactLock began sends its key as a
			// parameter on pgx, its *sql.DB's form, and so does a lock
			// taken in it under the context the scope gave fn.
			err = advisory.WithXactLock(ctx, tg.DB, keys.next(), func(ctx context.Context, tx *sql.Tx) error {
				return advisory.XactLock(ctx, tx, keys.next())
			}, advisory.Try())
			if err != nil {
				t.Fatal(err)
			}
		}

		got := preparedStatements(t, conn)
		var want []string
		if tg.Driver != pgtest.DriverPQ {
			want = []string{
				"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock($1) END",
				"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock($1,$2) END",
				"SELECT 1 WHERE pg_catalog.pg_advisory_unlock($1)",
				"SELECT 1 WHERE pg_catalog.pg_advisory_unlock($1,$2)",
				// The engine's probe, once per connection, at its
				// first lock call.
				sqltext.EngineProbe,
			}
			slices.Sort(want) // as preparedStatements sorts them
		}
		if !slices.Equal(got, want) {
			t.Errorf("prepared statements on the connection:\n got %q\nwant %q", got, want)
		}
		// conn is held, so WithXactLock took the pool's other connection.
		if tg.Driver != pgtest.DriverPQ {
			xconn := pgtest.Conn(t, tg.DB)
			got := preparedStatements(t, xconn)
			// A free key's wait is its try; the connection was probed
			// at its first lock call.
			want := []string{"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock($1) END", sqltext.EngineProbe}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("prepared statements on the transactions' connection:\n got %q\nwant %q", got, want)
			}
		}
	})
}

// preparedStatements returns the texts of the statements prepared on
// conn's session, sorted byte by byte, as slices.Sort sorts, but for the
// one that asks.
func preparedStatements(t *testing.T, conn *sql.Conn) []string {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), `SELECT statement FROM pg_prepared_statements ORDER BY statement COLLATE "C"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s, "pg_prepared_statements") {
			out = append(out, s)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
