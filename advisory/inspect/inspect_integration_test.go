package inspect_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/inspect"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of Locks and WaitGraph, and the proof that the two
// key spaces are distinct.
//
// Advisory locks belong to a database: the same key in two databases is
// two locks. So each test here runs in a database of its own, created for
// it: Locks, which reports the current database, sees that test's locks
// and no other's, and fixed keys such as 100:hashtext('sync_inventory')
// cannot collide with other tests sharing the server.

// locksUntil polls Locks until done accepts its answer, and returns that
// answer. It fails t if Locks fails or pgtest.PollTimeout passes.
func locksUntil(t *testing.T, db *sql.DB, done func([]inspect.Lock) bool, opts ...inspect.Option) []inspect.Lock {
	t.Helper()
	var locks []inspect.Lock
	var lerr error
	err := pgtest.Poll(5*time.Millisecond, func() (bool, error) {
		locks, lerr = inspect.Locks(context.Background(), db, opts...)
		return lerr == nil && done(locks), lerr
	})
	switch {
	case lerr != nil:
		t.Fatalf("Locks: %v", lerr)
	case err != nil:
		t.Fatalf("Locks still shows (%v):\n%v", err, locks)
	}
	return locks
}

// inspWaiters counts the locks not granted.
func inspWaiters(locks []inspect.Lock) int {
	n := 0
	for _, l := range locks {
		if !l.Granted {
			n++
		}
	}
	return n
}

// inspSummary is what TestLocksIntegration compares exactly.
type inspSummary struct {
	Key       advisory.Key
	Shared    bool
	Granted   bool
	PID       int
	BlockedBy []int
}

func inspSummarize(locks []inspect.Lock) []inspSummary {
	out := make([]inspSummary, len(locks))
	for i, l := range locks {
		out[i] = inspSummary{l.Key, l.Shared, l.Granted, l.PID, l.BlockedBy}
	}
	return out
}

// inspLock takes a session lock in a goroutine that waits for it, and
// returns a channel that reports the result. At t's cleanup a wait still
// going is cancelled, and the goroutine has ended before the test does.
func inspLock(t *testing.T, conn *sql.Conn, key advisory.Key) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- advisory.Lock(ctx, conn, key)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return done
}

// TestLocksIntegration holds bigint and pair keys, shared and
// exclusive, in session and transaction locks, with two waiters, and
// checks that Locks reports exactly those, with their blockers.
func TestLocksIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		app := pgtest.UniqueName("inspect-")
		tg = pgtest.NewDatabase(t, tg, app)

		negBig := advisory.Int64Key(-(1 << 40) - 5) // classid and objid both above 2^31
		pairNeg := advisory.PairKey(-7, 3)
		pairBoth := advisory.PairKey(math.MinInt32, -1)
		xactKey := advisory.Int64Key(5)

		a, b, c, d := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
		pa, pb, pc, pd := pgtest.PID(t, a), pgtest.PID(t, b), pgtest.PID(t, c), pgtest.PID(t, d)

		// a: exclusive on a negative bigint, shared on a pair, exclusive
		// on a pair of negative halves.
		for _, step := range []error{
			advisory.Lock(ctx, a, negBig),
			advisory.LockShared(ctx, a, pairNeg),
			advisory.Lock(ctx, a, pairBoth),
			// b: shared on the same pair.
			advisory.LockShared(ctx, b, pairNeg),
		} {
			if step != nil {
				t.Fatal(step)
			}
		}
		// e: a transaction lock, held while the transaction is open.
		tx, err := tg.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		pe := pgtest.PID(t, tx)
		if err := advisory.XactLockShared(ctx, tx, xactKey); err != nil {
			t.Fatal(err)
		}

		// c waits for a's bigint; d waits for an exclusive lock on the
		// pair that a and b share.
		cDone := inspLock(t, c, negBig)
		dDone := inspLock(t, d, pairNeg)
		// waitstart can lag a moment behind the start of a wait.
		locks := locksUntil(t, tg.DB, func(ls []inspect.Lock) bool {
			n := 0
			for _, l := range ls {
				if !l.Granted && !l.WaitStart.IsZero() {
					n++
				}
			}
			return n == 2
		})

		want := []inspSummary{
			{Key: xactKey, Shared: true, Granted: true, PID: pe},
			{Key: negBig, Granted: true, PID: pa},
			{Key: negBig, PID: pc, BlockedBy: []int{pa}},
			{Key: pairBoth, Granted: true, PID: pa},
			{Key: pairNeg, Shared: true, Granted: true, PID: min(pa, pb)},
			{Key: pairNeg, Shared: true, Granted: true, PID: max(pa, pb)},
			{Key: pairNeg, PID: pd, BlockedBy: slices.Sorted(slices.Values([]int{pa, pb}))},
		}
		// Locks sorts bigint keys before pair keys, each by value.
		slices.SortStableFunc(want, func(x, y inspSummary) int { return x.Key.Compare(y.Key) })
		if got := inspSummarize(locks); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Locks =\n%v\nwant\n%v", got, want)
		}

		for _, l := range locks {
			var addr string
			if err := tg.DB.QueryRowContext(ctx, "SELECT coalesce(host(client_addr), '') FROM pg_stat_activity WHERE pid = $1",
				l.PID).Scan(&addr); err != nil {
				t.Fatal(err)
			}
			if l.ApplicationName != app || l.User == "" || l.Database == "" || l.ClientAddr != addr || l.State == "" || l.Query == "" {
				t.Errorf("lock %v: session fields %q %q %q %q %q %q; want app %q, client %q, all set",
					l, l.ApplicationName, l.User, l.Database, l.ClientAddr, l.State, l.Query, app, addr)
			}
			switch {
			case l.PID == pe:
				if l.State != "idle in transaction" || l.XactStart.IsZero() {
					t.Errorf("transaction holder: state %q, xact_start %v", l.State, l.XactStart)
				}
			case !l.Granted:
				if l.State != "active" || !strings.Contains(l.Query, "pg_advisory_lock") || l.XactStart.IsZero() ||
					l.WaitStart.IsZero() || l.Waited < 0 || l.StateChange.IsZero() {
					t.Errorf("waiter %v: state %q, query %q, xact_start %v, waitstart %v, waited %v",
						l, l.State, l.Query, l.XactStart, l.WaitStart, l.Waited)
				}
			default:
				if l.State != "idle" || !l.XactStart.IsZero() || !l.WaitStart.IsZero() || l.Waited != 0 {
					t.Errorf("idle holder %v: state %q, xact_start %v, waitstart %v", l, l.State, l.XactStart, l.WaitStart)
				}
			}
		}

		// The wait-for graph names both waiters under their blockers.
		graph := inspect.WaitGraph(locks)
		for _, line := range []string{
			fmt.Sprintf("pid %d (%s): holds exclusive %s, exclusive %s, shared %s\n", pa, app, negBig, pairBoth, pairNeg),
			fmt.Sprintf("blocks pid %d (%s): waits", pc, app),
			fmt.Sprintf("for exclusive %s\n", negBig),
			fmt.Sprintf("pid %d (%s): holds shared %s\n", pb, app, pairNeg),
			fmt.Sprintf("blocks pid %d (%s): waits", pd, app),
			fmt.Sprintf("for exclusive %s\n", pairNeg),
		} {
			if !strings.Contains(graph, line) {
				t.Errorf("WaitGraph lacks %q:\n%s", line, graph)
			}
		}

		// Releasing a and b lets c and d in.
		if err := advisory.UnlockAll(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := advisory.UnlockAll(ctx, b); err != nil {
			t.Fatal(err)
		}
		for _, done := range []<-chan error{cDone, dDone} {
			if err := <-done; err != nil {
				t.Errorf("waiter: %v", err)
			}
		}
		locks = locksUntil(t, tg.DB, func(l []inspect.Lock) bool { return len(l) == 3 })
		if inspWaiters(locks) != 0 || inspect.WaitGraph(locks) != "" {
			t.Errorf("after release, Locks = %v; want three granted locks", locks)
		}
		for _, conn := range []*sql.Conn{c, d} {
			if err := advisory.UnlockAll(ctx, conn); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestLocksHandWrittenSQLIntegration takes a lock with hand-written SQL,
// as psql would, and checks that Locks decodes it as the NameKey of the
// same name, and that NameKey conflicts with it: the client-side hashtext
// agrees with the server's.
func TestLocksHandWrittenSQLIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "inspect-psql")
		var reg keyspace.Registry
		inventory := reg.MustRegister(advisory.Namespace{ID: 100, Name: "inventory", Owner: "team-warehouse"})
		key := advisory.NameKey(100, "sync_inventory")

		psql, app := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
		pid := pgtest.PID(t, psql)
		pgtest.Exec(t, psql, "SELECT pg_advisory_lock(100, hashtext('sync_inventory'))")

		locks, err := inspect.Locks(ctx, tg.DB, inspect.WithRegistry(&reg))
		if err != nil {
			t.Fatal(err)
		}
		if len(locks) != 1 || locks[0].Key != key || locks[0].Key != inventory.NameKey("sync_inventory") ||
			locks[0].PID != pid || !locks[0].Granted || locks[0].Shared || locks[0].Namespace != "inventory" {
			t.Fatalf("Locks = %v; want pid %d holding exclusive %s [inventory]", locks, pid, key)
		}

		if ok, err := advisory.TryLock(ctx, app, key); err != nil || ok {
			t.Errorf("TryLock(NameKey) while SQL holds the lock = %v, %v; want false", ok, err)
		}
		err = advisory.WithXactLock(ctx, tg.DB, key, func(context.Context, *sql.Tx) error { return nil }, advisory.Try())
		if !errors.Is(err, advisory.ErrNotAcquired) {
			t.Errorf("WithXactLock(NameKey, Try) while SQL holds the lock = %v; want ErrNotAcquired", err)
		}

		// And the other way round.
		pgtest.Exec(t, psql, "SELECT pg_advisory_unlock(100, hashtext('sync_inventory'))")
		if ok, err := advisory.TryLock(ctx, app, key); err != nil || !ok {
			t.Fatalf("TryLock(NameKey) on the free key = %v, %v; want true", ok, err)
		}
		var got bool
		if err := psql.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(100, hashtext('sync_inventory'))").Scan(&got); err != nil || got {
			t.Errorf("SQL try while NameKey is held = %v, %v; want false", got, err)
		}
		if err := advisory.Unlock(ctx, app, key); err != nil {
			t.Error(err)
		}
	})
}

// TestKeySpacesAreDistinctIntegration proves that pg_advisory_lock(bigint)
// and pg_advisory_lock(int, int) are two lock spaces, not two spellings of
// one: PairKey(1, 2) and Int64Key(1<<32 | 2) = 4294967298, which pg_locks
// shows with the same classid and objid, are held at once by two
// sessions, and each excludes a third session. docs/keys.md cites this
// test.
func TestKeySpacesAreDistinctIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "inspect-keyspaces")
		tests := []struct {
			name string
			a, b int32
		}{
			{"OneTwo", 1, 2},
			{"NegativeHalves", -1, -2},
			{"Extremes", math.MinInt32, math.MaxInt32},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				pair := advisory.PairKey(tt.a, tt.b)
				big := advisory.Int64Key(int64(tt.a)<<32 | int64(uint32(tt.b)))
				if tt.name == "OneTwo" && big != advisory.Int64Key(4294967298) {
					t.Fatalf("Int64Key(1<<32|2) = %s", big)
				}
				connA, connB, connC := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				pidA, pidB := pgtest.PID(t, connA), pgtest.PID(t, connB)

				if err := advisory.Lock(ctx, connA, pair); err != nil {
					t.Fatal(err)
				}
				if ok, err := advisory.TryLock(ctx, connB, big); err != nil || !ok {
					t.Fatalf("TryLock(%s) while another session holds %s = %v, %v; want true", big, pair, ok, err)
				}
				locks, err := inspect.Locks(ctx, tg.DB)
				if err != nil {
					t.Fatal(err)
				}
				want := []inspSummary{{Key: big, Granted: true, PID: pidB}, {Key: pair, Granted: true, PID: pidA}}
				if got := inspSummarize(locks); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("Locks = %v; want %v", got, want)
				}
				// Each is a real lock: the third session gets neither.
				for _, k := range []advisory.Key{pair, big} {
					if ok, err := advisory.TryLock(ctx, connC, k); err != nil || ok {
						t.Errorf("TryLock(%s) on a held key = %v, %v; want false", k, ok, err)
					}
				}
				if err := advisory.Unlock(ctx, connA, pair); err != nil {
					t.Error(err)
				}
				if err := advisory.Unlock(ctx, connB, big); err != nil {
					t.Error(err)
				}
			})
		}
	})
}

// TestLocksWithoutMonitorIntegration runs Locks as a role without
// pg_monitor: it sees every lock, its own session in full, other roles'
// sessions without their activity, and reports no error.
func TestLocksWithoutMonitorIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "inspect-admin")
		role := pgtest.UniqueName("pgadvisory_nomon_")
		pgtest.Exec(t, tg.DB, "CREATE ROLE "+role+" LOGIN")
		t.Cleanup(func() {
			// After the role's sessions are gone: cleanups run in
			// reverse, and the role's *sql.DB closes first.
			if _, err := tg.DB.ExecContext(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
				t.Errorf("drop role: %v", err)
			}
		})
		var hasMonitor bool
		if err := tg.DB.QueryRowContext(ctx, "SELECT pg_has_role($1, 'pg_monitor', 'USAGE')", role).Scan(&hasMonitor); err != nil || hasMonitor {
			t.Fatalf("role %s has pg_monitor: %v, %v", role, hasMonitor, err)
		}

		// tg's DSN names the test's database already; only the user changes.
		limited := tg.Server.WithDSN(t, func(u *url.URL) {
			u.User = url.User(role)
			pgtest.SetParam(u, "application_name", "inspect-limited")
		}).Open(t, tg.Driver)

		admin, waiter, own := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, limited)
		adminPID, waiterPID, ownPID := pgtest.PID(t, admin), pgtest.PID(t, waiter), pgtest.PID(t, own)
		adminKey, ownKey := advisory.PairKey(1, 1), advisory.PairKey(1, 2)
		if err := advisory.Lock(ctx, admin, adminKey); err != nil {
			t.Fatal(err)
		}
		if err := advisory.Lock(ctx, own, ownKey); err != nil {
			t.Fatal(err)
		}
		waited := inspLock(t, waiter, ownKey)

		locks := locksUntil(t, limited, func(l []inspect.Lock) bool { return inspWaiters(l) == 1 })
		want := []inspSummary{
			{Key: adminKey, Granted: true, PID: adminPID},
			{Key: ownKey, Granted: true, PID: ownPID},
			{Key: ownKey, PID: waiterPID, BlockedBy: []int{ownPID}},
		}
		if got := inspSummarize(locks); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Locks = %v; want %v", got, want)
		}
		mine := locks[1]
		if mine.User != role || mine.ApplicationName != "inspect-limited" || mine.State != "idle" || mine.Query == "" || mine.Database == "" {
			t.Errorf("own session: %+v; want every field", mine)
		}
		for _, other := range []inspect.Lock{locks[0], locks[2]} {
			if other.User == "" || other.User == role || other.ApplicationName != "inspect-admin" ||
				other.Query != "" || other.State != "" || other.ClientAddr != "" ||
				!other.XactStart.IsZero() || !other.StateChange.IsZero() {
				t.Errorf("another role's session: %+v; want its user and application_name, and no activity", other)
			}
		}

		if err := advisory.UnlockAll(ctx, own); err != nil {
			t.Error(err)
		}
		if err := <-waited; err != nil {
			t.Error(err)
		}
		for _, conn := range []*sql.Conn{admin, waiter} {
			if err := advisory.UnlockAll(ctx, conn); err != nil {
				t.Error(err)
			}
		}
	})
}

// extremeKey is a key at an end of its key space, with the tag pg_locks
// shows for it, worked out by hand.
type extremeKey struct {
	name            string
	key             advisory.Key
	classid, objid  int64
	objsubid        int
	wantKeyAsString string
}

// extremeKeys are the ends of both key spaces.
var extremeKeys = []extremeKey{
	{"Int64Min", advisory.Int64Key(math.MinInt64), 1 << 31, 0, 1, "-9223372036854775808"},
	{"Int64Max", advisory.Int64Key(math.MaxInt64), 1<<31 - 1, 1<<32 - 1, 1, "9223372036854775807"},
	{"PairMinMax", advisory.PairKey(math.MinInt32, math.MaxInt32), 1 << 31, 1<<31 - 1, 2, "-2147483648:2147483647"},
	{"PairMaxMin", advisory.PairKey(math.MaxInt32, math.MinInt32), 1<<31 - 1, 1 << 31, 2, "2147483647:-2147483648"},
}

// extremeTag is one granted advisory lock as pg_locks shows it.
type extremeTag struct {
	classid, objid int64
	objsubid       int
	shared         bool
}

// extremeTagsOf returns the granted advisory locks of backend pid as
// pg_locks shows them, and their keys decoded with DecodeKey, both in
// key order.
func extremeTagsOf(t *testing.T, db *sql.DB, pid int) ([]extremeTag, []advisory.Key) {
	t.Helper()
	rows, err := db.QueryContext(context.Background(),
		`SELECT classid::int8, objid::int8, objsubid::int4, mode = 'ShareLock' FROM pg_locks `+
			`WHERE locktype = 'advisory' AND granted AND pid = $1`, pid)
	if err != nil {
		t.Fatalf("pg_locks: %v", err)
	}
	defer rows.Close()
	type decoded struct {
		tag extremeTag
		key advisory.Key
	}
	var all []decoded
	for rows.Next() {
		var d decoded
		if err := rows.Scan(&d.tag.classid, &d.tag.objid, &d.tag.objsubid, &d.tag.shared); err != nil {
			t.Fatalf("pg_locks: %v", err)
		}
		if d.key, err = inspect.DecodeKey(uint32(d.tag.classid), uint32(d.tag.objid), int16(d.tag.objsubid)); err != nil {
			t.Fatalf("DecodeKey(%+v): %v", d.tag, err)
		}
		all = append(all, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("pg_locks: %v", err)
	}
	slices.SortFunc(all, func(a, b decoded) int { return a.key.Compare(b.key) })
	tags, keys := make([]extremeTag, len(all)), make([]advisory.Key, len(all))
	for i, d := range all {
		tags[i], keys[i] = d.tag, d.key
	}
	return tags, keys
}

// extremeLocksKeys returns the keys Locks reports backend pid holding,
// in the order of Locks, which is key order.
func extremeLocksKeys(t *testing.T, db *sql.DB, pid int) []advisory.Key {
	t.Helper()
	locks, err := inspect.Locks(context.Background(), db)
	if err != nil {
		t.Fatalf("Locks: %v", err)
	}
	var keys []advisory.Key
	for _, l := range locks {
		if l.PID == pid && l.Granted {
			keys = append(keys, l.Key)
		}
	}
	return keys
}

// TestExtremeKeysIntegration takes the keys at the ends of both key
// spaces, one at a time and all together with LockKeys and XactLockKeys
// (whose statement lists bigint and pair keys in two VALUES lists), and
// checks that the server shows exactly the tag each key should have, that
// DecodeKey and Locks decode it back to the same key, that another
// session cannot take it, and that it is released. The keys are fixed, so
// the test runs in a database of its own.
func TestExtremeKeysIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "inspect-extremes")

		// requireHeld checks that backend pid holds exactly want, in
		// exclusive mode, as pg_locks, DecodeKey and Locks see it, and
		// that the session of other cannot take any of them.
		requireHeld := func(t *testing.T, pid int, other *sql.Conn, want []extremeKey) {
			t.Helper()
			want = slices.Clone(want)
			slices.SortFunc(want, func(a, b extremeKey) int { return a.key.Compare(b.key) })
			var wantTags []extremeTag
			var wantKeys []advisory.Key
			for _, x := range want {
				wantTags = append(wantTags, extremeTag{classid: x.classid, objid: x.objid, objsubid: x.objsubid})
				wantKeys = append(wantKeys, x.key)
				if s := x.key.String(); s != x.wantKeyAsString {
					t.Errorf("%s: key String = %q, want %q", x.name, s, x.wantKeyAsString)
				}
			}
			tags, keys := extremeTagsOf(t, tg.DB, pid)
			if !slices.Equal(tags, wantTags) {
				t.Errorf("pg_locks shows backend %d holding %+v; want %+v", pid, tags, wantTags)
			}
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("DecodeKey decodes pg_locks as %v; want %v", keys, wantKeys)
			}
			if got := extremeLocksKeys(t, tg.DB, pid); !slices.Equal(got, wantKeys) {
				t.Errorf("Locks reports backend %d holding %v; want %v", pid, got, wantKeys)
			}
			for _, x := range want {
				if ok, err := advisory.TryLock(ctx, other, x.key); err != nil || ok {
					t.Errorf("TryLock(%s) from another session = %v, %v; want false", x.key, ok, err)
				}
			}
		}

		for _, x := range extremeKeys {
			t.Run(x.name, func(t *testing.T) {
				conn, other := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				pid := pgtest.PID(t, conn)
				if err := advisory.Lock(ctx, conn, x.key); err != nil {
					t.Fatalf("Lock(%s): %v", x.key, err)
				}
				requireHeld(t, pid, other, []extremeKey{x})
				if err := advisory.Unlock(ctx, conn, x.key); err != nil {
					t.Fatalf("Unlock(%s): %v", x.key, err)
				}
				pgtest.RequireNoLocks(t, tg.DB, pid)
				// Released, the key is free for the other session.
				if ok, err := advisory.TryLock(ctx, other, x.key); err != nil || !ok {
					t.Fatalf("TryLock(%s) after Unlock = %v, %v; want true", x.key, ok, err)
				}
				if err := advisory.Unlock(ctx, other, x.key); err != nil {
					t.Fatal(err)
				}
			})
		}

		// Bigints and pairs interleaved, so that both VALUES lists carry
		// extremes.
		mixed := []advisory.Key{
			extremeKeys[0].key, // Int64Min
			extremeKeys[2].key, // PairMinMax
			extremeKeys[1].key, // Int64Max
			extremeKeys[3].key, // PairMaxMin
		}

		t.Run("LockKeys", func(t *testing.T) {
			conn, other := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
			pid := pgtest.PID(t, conn)
			if err := advisory.LockKeys(ctx, conn, mixed...); err != nil {
				t.Fatalf("LockKeys(%v): %v", mixed, err)
			}
			requireHeld(t, pid, other, extremeKeys)
			if err := advisory.UnlockKeys(ctx, conn, mixed...); err != nil {
				t.Fatalf("UnlockKeys(%v): %v", mixed, err)
			}
			pgtest.RequireNoLocks(t, tg.DB, pid)
		})

		t.Run("XactLockKeys", func(t *testing.T) {
			other := pgtest.Conn(t, tg.DB)
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			pid := pgtest.PID(t, tx)
			if err := advisory.XactLockKeys(ctx, tx, mixed...); err != nil {
				t.Fatalf("XactLockKeys(%v): %v", mixed, err)
			}
			requireHeld(t, pid, other, extremeKeys)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			pgtest.RequireNoLocks(t, tg.DB, pid)
		})
	})
}
