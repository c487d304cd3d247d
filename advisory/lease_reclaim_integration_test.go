package advisory_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// testLeaseReclaimAt checks, on two direct sessions, the statements with
// which a lease refused at its start undoes a lock that a transaction
// pooler left on another backend than the start's: the start names the
// backend that holds the key exclusively, and the undo releases the key
// on that backend, or ends it from another one only when told to and
// only while it still holds the key.
func testLeaseReclaimAt(t *testing.T) {
	ctx := context.Background()
	for _, srv := range pgtest.Servers(t) {
		for _, d := range pgtest.Drivers {
			t.Run(srv.Name+"/"+d, func(t *testing.T) {
				t.Parallel()
				db := srv.Open(t, d)
				keys := newPGKeys()
				key := keys.next()
				sk := sqltext.KeyOf(key)
				holder, other := pgtest.Conn(t, db), pgtest.Conn(t, db)
				pid := int64(pgtest.PID(t, holder))
				exec := func(c *sql.Conn, q string) int64 {
					t.Helper()
					res, err := c.ExecContext(ctx, q)
					if err != nil {
						t.Fatalf("%s: %v", q, err)
					}
					n, err := res.RowsAffected()
					if err != nil {
						t.Fatal(err)
					}
					return n
				}
				if err := advisory.Lock(ctx, holder, key); err != nil {
					t.Fatal(err)
				}

				// The start, run on another backend, names the holder.
				start := sqltext.LeaseStart(sqltext.Inline, false, sk, false)
				var startPID, named sql.NullInt64
				var standby, mine bool
				var token, mark sql.NullInt64
				if err := other.QueryRowContext(ctx, start.Query).Scan(&startPID, &standby, &mine, &token, &mark, &named); err != nil {
					t.Fatal(err)
				}
				if mine || mark.Valid || !named.Valid || named.Int64 != pid {
					t.Fatalf("start on another backend: mine %v, mark %v, other %v; want false, NULL, %d", mine, mark, named, pid)
				}
				shared := sqltext.LeaseStart(sqltext.Inline, true, sk, false)
				if err := other.QueryRowContext(ctx, shared.Query).Scan(&startPID, &standby, &mine, &token, &mark, &named); err != nil {
					t.Fatal(err)
				}
				if named.Valid {
					t.Errorf("shared start: other %d; want NULL, since a shared key has many holders", named.Int64)
				}

				// Elsewhere, a gentle undo does nothing.
				if n := exec(other, sqltext.LeaseReclaimAt(pid, sk, false)); n != 0 {
					t.Errorf("gentle undo elsewhere affected %d rows; want 0", n)
				}
				pgRequireHolds(t, db, int(pid), key, false)

				// On the holder bearing another lease's mark, nothing.
				exec(holder, "SELECT pg_catalog.set_config('pgadvisory.lease', '5', false)")
				if n := exec(holder, sqltext.LeaseReclaimAt(pid, sk, false)); n != 0 {
					t.Errorf("undo on a marked holder affected %d rows; want 0", n)
				}
				pgRequireHolds(t, db, int(pid), key, false)
				exec(holder, "SELECT pg_catalog.set_config('pgadvisory.lease', '', false)")

				// On the holder, unmarked, it releases the key.
				if n := exec(holder, sqltext.LeaseReclaimAt(pid, sk, true)); n != 1 {
					t.Errorf("undo on the holder affected %d rows; want 1", n)
				}
				pgRequireFree(t, db, key)

				// Elsewhere, told to end, it leaves a holder that no
				// longer holds the key alone.
				if n := exec(other, sqltext.LeaseReclaimAt(pid, sk, true)); n != 0 {
					t.Errorf("ending undo of a free key affected %d rows; want 0", n)
				}
				if got := int64(pgtest.PID(t, holder)); got != pid {
					t.Fatalf("holder's pid %d; want %d", got, pid)
				}

				// Elsewhere, told to end, it ends the holder.
				if err := advisory.Lock(ctx, holder, key); err != nil {
					t.Fatal(err)
				}
				if n := exec(other, sqltext.LeaseReclaimAt(pid, sk, true)); n != 2 {
					t.Errorf("ending undo elsewhere affected %d rows; want 2", n)
				}
				pgDiscard(holder)
				pgWaitGone(t, db, int(pid))
				pgRequireFree(t, db, key)
			})
		}
	}
}
