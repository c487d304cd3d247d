package advisory_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of a fencing token's layout, of the synchronous commit
// of its draw, and of its increase over crashes (the TokenLayout,
// SyncCommit and Crash subtests of TestFencingIntegration).

// pgTimeline returns the timeline of db's server, as pg_control_checkpoint
// reports it: the timeline of the last checkpoint, which is the current
// one on a server that has not just been promoted.
func pgTimeline(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var tl int64
	if err := db.QueryRow("SELECT timeline_id FROM pg_catalog.pg_control_checkpoint()").Scan(&tl); err != nil {
		t.Fatal(err)
	}
	return tl
}

// pgLockerToken acquires key with a fencing token through lk, releases it,
// and returns the token.
func pgLockerToken(t *testing.T, lk *advisory.Locker, key advisory.Key) int64 {
	t.Helper()
	ctx := context.Background()
	l, err := lk.Acquire(ctx, key, advisory.Fencing())
	if err != nil {
		t.Fatalf("Locker.Acquire(%v, Fencing()): %v", key, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return l.Token()
}

// testFencingTokenLayout: a token is the server's timeline
// above bit 40 and the sequence's value below, from Acquire and from a
// Locker alike; tokens of an earlier release, the sequence's value alone,
// are smaller than any new one, even at the end of the counter's range;
// and a counter past 2^40-1 fails the acquisition, taking nothing, rather
// than wrap.
func testFencingTokenLayout(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		tg = pgtest.NewDatabase(t, tg, "fencing-layout")
		tl := pgTimeline(t, tg.DB)
		lk := newLocker(t, tg.DB)

		// What an earlier release left, three values before the end of
		// the counter's range, and the last token it handed out.
		pgtest.Exec(t, tg.DB, "CREATE SEQUENCE public.pgadvisory_fencing_token")
		pgtest.Exec(t, tg.DB, "SELECT pg_catalog.setval('public.pgadvisory_fencing_token', $1)", int64(1<<40-4))
		var earlier int64
		if err := tg.DB.QueryRow("SELECT pg_catalog.nextval('public.pgadvisory_fencing_token')").Scan(&earlier); err != nil {
			t.Fatal(err)
		}

		// The new sequence goes on from the old one: counters 2^40-2
		// and 2^40-1, the last.
		draws := []struct {
			name string
			draw func() int64
		}{
			{"Acquire", func() int64 { return pgToken(t, tg.DB, keys.next()) }},
			{"Locker", func() int64 { return pgLockerToken(t, lk, keys.next()) }},
		}
		for _, d := range draws {
			tok := d.draw()
			var last int64
			if err := tg.DB.QueryRow("SELECT last_value FROM pgadvisory.fencing_token").Scan(&last); err != nil {
				t.Fatal(err)
			}
			gotTL, gotCounter := advisory.SplitToken(tok)
			if gotTL != tl || gotCounter != last || tok != tl<<40|last {
				t.Errorf("%s's token %d: timeline %d, counter %d; want %d and %d, the sequence's last value", d.name, tok, gotTL, gotCounter, tl, last)
			}
			if tok <= earlier {
				t.Errorf("%s's token %d after the earlier release's %d", d.name, tok, earlier)
			}
		}
		var last int64
		if err := tg.DB.QueryRow("SELECT last_value FROM pgadvisory.fencing_token").Scan(&last); err != nil || last != 1<<40-1 {
			t.Fatalf("the sequence's last value %d, %v; want 2^40-1", last, err)
		}

		// The counter's range is spent: every way of drawing fails, and
		// says so, the server's error wrapped.
		spent := func(name string, err error) {
			t.Helper()
			for _, want := range []string{"fencing: no fencing token is left on this database", "does not fit a fencing token"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s past the counter's end: %v; want an error that says %q", name, err, want)
				}
			}
			if pgSQLState(err) != "22P02" {
				t.Errorf("%s past the counter's end: SQLSTATE %q; want the server's 22P02 reachable", name, pgSQLState(err))
			}
		}
		key := keys.next()
		_, err := advisory.Acquire(ctx, tg.DB, key, advisory.Fencing())
		spent("Acquire", err)
		_, err = lk.Acquire(ctx, key, advisory.Fencing())
		spent("Locker.Acquire", err)
		pgtest.AwaitFree(t, tg.DB, key)
	})
}

// testFencingSyncCommit: the statement that draws a token makes
// its own transaction's commit synchronous when the session's
// synchronous_commit is off, and only that transaction's: the session's
// setting is the same afterwards, and one that is not off is left alone.
// Inside a transaction block of the caller's, the block's commit is the
// synchronous one, and the session's setting comes back after it.
func testFencingSyncCommit(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := pgtest.OpenSetting(t, tg, "synchronous_commit", "off")
		keys := newPGKeys()
		show := func(t *testing.T, conn *sql.Conn) string {
			t.Helper()
			var v string
			if err := conn.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		tests := []struct {
			name   string
			before []string // statements before the lease, on its connection
			during string   // synchronous_commit right after the token
			after  []string // statements after it
			end    string   // synchronous_commit at the end
		}{
			{name: "Implicit", during: "off", end: "off"},
			{name: "Block", before: []string{"BEGIN", "SET LOCAL synchronous_commit = off"},
				during: "local", after: []string{"COMMIT"}, end: "off"},
			{name: "Kept", before: []string{"SET synchronous_commit = remote_write"}, during: "remote_write", end: "remote_write"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				conn := pgtest.Conn(t, db)
				for _, stmt := range tt.before {
					pgtest.Exec(t, conn, stmt)
				}
				key := keys.next()
				if err := advisory.Lock(ctx, conn, key); err != nil {
					t.Fatal(err)
				}
				l, err := advisory.Watch(ctx, conn, key, advisory.WatchConfig{Fencing: true})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = l.Release(ctx) }()
				if l.Token() < 1<<40 {
					t.Errorf("Token %d; want one of timeline 1 or later", l.Token())
				}
				if got := show(t, conn); got != tt.during {
					t.Errorf("synchronous_commit after the token: %s; want %s", got, tt.during)
				}
				for _, stmt := range tt.after {
					pgtest.Exec(t, conn, stmt)
				}
				if got := show(t, conn); got != tt.end {
					t.Errorf("synchronous_commit at the end: %s; want %s", got, tt.end)
				}
			})
		}
	})
}

// crashRuns is how many times TestFencingIntegration/Crash crashes the
// server per driver: 2, or 15 under PGADVISORY_TEST_LONG=1.
func crashRuns() int {
	if os.Getenv("PGADVISORY_TEST_LONG") == "1" {
		return 15
	}
	return 2
}

// testFencingCrash draws fencing tokens on a dedicated server
// whose synchronous_commit is off (as the harness runs every server), then
// crashes it (SIGKILL, no shutdown) at once, starts it again, and draws
// again, crashRuns times per driver. Each token must be greater than every
// token before it: from Acquire, from a Locker, and from Watch inside a
// transaction block that the caller commits before the crash. Beside them
// the test draws a plain nextval from a sequence of its own, as an earlier
// release drew tokens, just before each crash, and logs how often that one
// went back: the failure the tokens no longer have.
func testFencingCrash(t *testing.T) {
	for _, s := range pgtest.StartServer(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			for _, d := range pgtest.Drivers {
				db := openNoIdle(t, s, d)
				pgtest.Exec(t, db, "CREATE SEQUENCE IF NOT EXISTS public.plain_token")
				keys := newPGKeys()
				var last, lastPlain int64
				var back, plainBack int
				tokens := 0
				check := func(what string, tok int64) {
					t.Helper()
					tokens++
					if tok <= last {
						back++
						t.Errorf("%s: %s token %d after %d", d, what, tok, last)
					}
					last = max(last, tok)
				}
				runs := crashRuns()
				for run := 0; run <= runs; run++ {
					if run > 0 {
						s.Crash(t)
					}
					check("Acquire", pgToken(t, db, keys.next()))
					lk, err := advisory.NewLocker(db, advisory.LockerConfig{})
					if err != nil {
						t.Fatal(err)
					}
					check("Locker", pgLockerToken(t, lk, keys.next()))
					if err := lk.Close(ctx); err != nil {
						t.Fatal(err)
					}
					check("Watch in a block", watchInBlock(t, db, keys.next()))

					// As an earlier release drew its tokens, last, so
					// that nothing flushes its WAL before the crash.
					var plain int64
					if err := db.QueryRowContext(ctx, "SELECT pg_catalog.nextval('public.plain_token')").Scan(&plain); err != nil {
						t.Fatal(err)
					}
					if run > 0 && plain <= lastPlain {
						plainBack++
					}
					lastPlain = max(lastPlain, plain)
				}
				t.Logf("%s/%s: %d crashes: %d tokens, %d went back; plain nextval went back after %d of %d crashes",
					s.Name, d, runs, tokens, back, plainBack, runs)
			}
		})
	}
}

// watchInBlock takes key in a transaction block on a connection of db,
// turns it into a lease with a fencing token, commits the block, releases
// the lease and returns the token.
func watchInBlock(t *testing.T, db *sql.DB, key advisory.Key) int64 {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.Conn(t, db)
	pgtest.Exec(t, conn, "BEGIN")
	if err := advisory.Lock(ctx, conn, key); err != nil {
		t.Fatal(err)
	}
	l, err := advisory.Watch(ctx, conn, key, advisory.WatchConfig{Fencing: true})
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, conn, "COMMIT")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return l.Token()
}
