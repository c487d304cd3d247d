package advisory_test

import (
	"context"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of keys (key.go): the server's two key spaces, and
// NameKey's hash, which must be the server's.

// TestKeyIntegration runs the integration tests of keys, one subtest a
// theme, each on every server and driver.
func TestKeyIntegration(t *testing.T) {
	t.Run("Spaces", testKeySpaces)
	t.Run("NameKey", testKeyNameKey)
}

func testKeySpaces(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		// The halves are random so that tests sharing the server do not
		// collide; the signs cover both halves of the bigint.
		a, b := mrand.Int32N(1<<30)+1, mrand.Int32N(1<<30)+1
		tests := []struct {
			name string
			a, b int32
		}{
			{"Positive", a, b},
			{"NegativeHalves", -a, -b},
			{"Mixed", a, -b},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				pair := advisory.PairKey(tt.a, tt.b)
				big := advisory.Int64Key(int64(tt.a)<<32 | int64(uint32(tt.b)))
				connA, connB, connC := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				pidA, pidB := pgtest.PID(t, connA), pgtest.PID(t, connB)

				if err := advisory.Lock(ctx, connA, pair); err != nil {
					t.Fatalf("Lock(%s): %v", pair, err)
				}
				ok, err := advisory.TryLock(ctx, connB, big)
				if err != nil || !ok {
					t.Fatalf("TryLock(%s) while another session holds %s = %v, %v; want true: the key spaces are distinct", big, pair, ok, err)
				}

				// pg_locks shows the same classid and objid, told apart by
				// objsubid: 2 for the pair, 1 for the bigint.
				var rows [2]struct{ classid, objid, subid int64 }
				for i, pid := range []int{pidA, pidB} {
					err := tg.DB.QueryRowContext(ctx, `SELECT classid::bigint, objid::bigint, objsubid::bigint FROM pg_locks
						WHERE locktype = 'advisory' AND pid = $1 AND granted`, pid).Scan(&rows[i].classid, &rows[i].objid, &rows[i].subid)
					if err != nil {
						t.Fatalf("pg_locks of backend %d: %v", pid, err)
					}
				}
				if rows[0].classid != rows[1].classid || rows[0].objid != rows[1].objid || rows[0].subid != 2 || rows[1].subid != 1 {
					t.Errorf("pg_locks rows %+v (pair) and %+v (bigint); want equal classid and objid, objsubid 2 and 1", rows[0], rows[1])
				}
				pgRequireHolds(t, tg.DB, pidA, pair, false)
				pgRequireHolds(t, tg.DB, pidB, big, false)

				// Both are real locks: a third session gets neither.
				for _, k := range []advisory.Key{pair, big} {
					if ok, err := advisory.TryLock(ctx, connC, k); err != nil || ok {
						t.Errorf("TryLock(%s) on a held key = %v, %v; want false, nil", k, ok, err)
					}
				}
				if err := advisory.Unlock(ctx, connA, pair); err != nil {
					t.Errorf("Unlock(%s): %v", pair, err)
				}
				if err := advisory.Unlock(ctx, connB, big); err != nil {
					t.Errorf("Unlock(%s): %v", big, err)
				}
				pgRequireFree(t, tg.DB, pair)
				pgRequireFree(t, tg.DB, big)
			})
		}
	})
}

func testKeyNameKey(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		ns := newPGKeys().hi
		names := []string{"", "a", "orders", "héllo", "日本語 🙂", strings.Repeat("long name ", 100)}
		conn, other := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
		pid := pgtest.PID(t, conn)
		for _, name := range names {
			if !utf8.ValidString(name) {
				t.Fatalf("bad test name %q", name)
			}
			// Hand-written SQL takes the lock with the server's hash...
			pgtest.Exec(t, conn, "SELECT pg_advisory_lock($1::int, hashtext($2))", ns, name)
			key := advisory.NameKey(ns, name)
			// ...and it is the key NameKey computes: pg_locks shows it, a
			// try on it conflicts, and Unlock of it releases it.
			pgRequireHolds(t, tg.DB, pid, key, false)
			if ok, err := advisory.TryLock(ctx, other, key); err != nil || ok {
				t.Errorf("TryLock(NameKey(%d, %.20q)) while SQL holds it = %v, %v; want false", ns, name, ok, err)
			}
			if err := advisory.Unlock(ctx, conn, key); err != nil {
				t.Fatalf("Unlock(NameKey(%d, %.20q)) of the lock SQL took: %v", ns, name, err)
			}
			pgRequireNoLocks(t, tg.DB, pid)
		}
	})
}
