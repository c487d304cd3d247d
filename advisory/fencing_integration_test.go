package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of fencing tokens (fencing.go): the one sequence they
// come from, its first use, and the privileges it needs. Their layout and
// the crashes they survive are in fencing_token_integration_test.go, the
// failovers in fencing_failover_integration_test.go.

// TestFencingIntegration runs the integration tests of fencing tokens, one
// subtest a theme, each on every server and driver.
func TestFencingIntegration(t *testing.T) {
	t.Run("OneSequence", testFencingOneSequence)
	t.Run("FirstUseRace", testFencingFirstUseRace)
	t.Run("Privilege", testFencingPrivilege)
	t.Run("TokenLayout", testFencingTokenLayout)
	t.Run("SyncCommit", testFencingSyncCommit)
	t.Run("Crash", testFencingCrash)
	t.Run("FailoverTokens", testFencingFailoverTokens)
}

// pgSequences lists the sequences of db's database, as schema.name.
func pgSequences(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT schemaname || '.' || sequencename FROM pg_catalog.pg_sequences ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var seqs []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return seqs
}

// pgToken acquires key with a fencing token on db, releases it, and
// returns the token.
func pgToken(t *testing.T, db *sql.DB, key advisory.Key) int64 {
	t.Helper()
	ctx := context.Background()
	l, err := advisory.Acquire(ctx, db, key, advisory.Fencing())
	if err != nil {
		t.Fatalf("Acquire(%v, Fencing()): %v", key, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return l.Token()
}

// testFencingOneSequence: clients whose search_path differ
// (tenant_a, tenant_b, and an empty one) draw their tokens from one
// sequence, pgadvisory.fencing_token, so that tokens for the same key
// strictly increase whoever holds it; the first token comes after those
// of the sequences an earlier release created in the tenants' schemas;
// and no other sequence is created.
func testFencingOneSequence(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "fencing-one-sequence")
		for _, stmt := range []string{
			"CREATE SCHEMA tenant_a", "CREATE SCHEMA tenant_b",
			// What an earlier release left: a sequence per tenant.
			"CREATE SEQUENCE tenant_a.pgadvisory_fencing_token", "SELECT pg_catalog.setval('tenant_a.pgadvisory_fencing_token', 41)",
			"CREATE SEQUENCE tenant_b.pgadvisory_fencing_token", "SELECT pg_catalog.setval('tenant_b.pgadvisory_fencing_token', 57)",
		} {
			pgtest.Exec(t, tg.DB, stmt)
		}
		before := pgSequences(t, tg.DB)
		clients := []*sql.DB{
			pgtest.OpenSetting(t, tg, "search_path", "tenant_a"),
			pgtest.OpenSetting(t, tg, "search_path", "tenant_b"),
			pgtest.OpenSetting(t, tg, "search_path", `""`),
		}
		lockers := make([]*advisory.Locker, len(clients))
		for i, db := range clients {
			lk, err := advisory.NewLocker(db, advisory.LockerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lk.Close(context.Background()) })
			lockers[i] = lk
		}

		key := newPGKeys().next()
		var tokens []int64
		for i := range 12 {
			c := i % len(clients)
			if i%2 == 0 {
				tokens = append(tokens, pgToken(t, clients[c], key))
				continue
			}
			l, err := lockers[c].Acquire(ctx, key, advisory.Fencing())
			if err != nil {
				t.Fatalf("Locker.Acquire(%v, Fencing()) with search_path %d: %v", key, c, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, l.Token())
		}
		for i, tok := range tokens {
			if i == 0 && tok <= 57 {
				t.Errorf("first token %d; want it after the earlier release's 57", tok)
			}
			if i > 0 && tok <= tokens[i-1] {
				t.Errorf("tokens %v do not strictly increase", tokens)
				break
			}
		}

		after := pgSequences(t, tg.DB)
		want := slices.Sorted(slices.Values(append(slices.Clone(before), "pgadvisory.fencing_token")))
		if !slices.Equal(after, want) {
			t.Errorf("sequences before %v, after %v; want only pgadvisory.fencing_token added", before, after)
		}
	})
}

// testFencingFirstUseRace: sessions that take the first
// fencing tokens of a database at once, each creating the schema and the
// sequence if it finds them missing, all get a token, each a different
// one.
func testFencingFirstUseRace(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		tg = pgtest.NewDatabase(t, tg, "fencing-race")
		const n = 8
		keys := newPGKeys()
		dbs := make([]*sql.DB, n)
		for i := range dbs {
			dbs[i] = tg.Server.Open(t, tg.Driver)
			pgtest.Exec(t, dbs[i], "SELECT 1") // connected before the start
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		tokens := make([]int64, n)
		errs := make([]error, n)
		for i := range n {
			key := keys.next()
			wg.Go(func() {
				<-start
				ctx := context.Background()
				l, err := advisory.Acquire(ctx, dbs[i], key, advisory.Fencing())
				if err != nil {
					errs[i] = err
					return
				}
				tokens[i] = l.Token()
				errs[i] = l.Release(ctx)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		slices.Sort(tokens)
		if len(slices.Compact(tokens)) != n || tokens[0] < 1 {
			t.Errorf("tokens %v; want %d different ones", tokens, n)
		}
	})
}

// testFencingPrivilege: a role that may not create the schema
// pgadvisory, then may not use the schema, then may not use the sequence,
// gets an error that names the privilege and keeps the server's
// (SQLSTATE 42501); once granted USAGE on both, it draws tokens.
func testFencingPrivilege(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "fencing-privilege")
		role := pgtest.UniqueName("pgadvisory_nocreate_")
		pgtest.Exec(t, tg.DB, "CREATE ROLE "+role+" LOGIN")
		t.Cleanup(func() {
			// After the role's sessions are gone: cleanups run in
			// reverse, and the role's *sql.DB closes first.
			for _, stmt := range []string{"DROP OWNED BY " + role, "DROP ROLE IF EXISTS " + role} {
				if _, err := tg.DB.ExecContext(ctx, stmt); err != nil {
					t.Errorf("%s: %v", stmt, err)
				}
			}
		})
		limited := tg.Server.WithDSN(t, func(u *url.URL) { u.User = url.User(role) }).Open(t, tg.Driver)
		lk, err := advisory.NewLocker(limited, advisory.LockerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lk.Close(context.Background()) })
		keys := newPGKeys()

		// refused requires every way of taking a token to fail with the
		// server's 42501 and a message that says want.
		refused := func(want string) {
			t.Helper()
			key := keys.next()
			_, errAcquire := advisory.Acquire(ctx, limited, key, advisory.Fencing())
			_, errLocker := lk.Acquire(ctx, key, advisory.Fencing())
			conn := pgtest.Conn(t, limited)
			if err := advisory.Lock(ctx, conn, key); err != nil {
				t.Fatal(err)
			}
			_, errWatch := advisory.Watch(ctx, conn, key, advisory.WatchConfig{Fencing: true})
			for _, c := range []struct {
				name, want string
				err        error
			}{
				{"Acquire", want, errAcquire},
				{"Locker.Acquire", want, errLocker},
				{"Watch", "the role lacks a privilege that fencing tokens need", errWatch},
			} {
				if c.err == nil || !strings.Contains(c.err.Error(), c.want) || pgSQLState(c.err) != "42501" {
					t.Errorf("%s: %v; want an error with SQLSTATE 42501 that says %q", c.name, c.err, c.want)
				}
			}
			// Nothing is held: the sessions that took the key were
			// discarded, and the server ends them a moment later.
			pgtest.AwaitFree(t, tg.DB, key)
		}

		refused("fencing: the role cannot create schema pgadvisory: it needs CREATE on the database, " +
			"or an administrator can run: CREATE SCHEMA pgadvisory; CREATE SEQUENCE pgadvisory.fencing_token; " +
			"GRANT USAGE ON SCHEMA pgadvisory TO " + role + "; GRANT USAGE ON SEQUENCE pgadvisory.fencing_token TO " + role)

		pgtest.Exec(t, tg.DB, "CREATE SCHEMA pgadvisory")
		refused("fencing: the role lacks USAGE on schema pgadvisory: an administrator can run: GRANT USAGE ON SCHEMA pgadvisory TO " + role)

		pgtest.Exec(t, tg.DB, "GRANT USAGE ON SCHEMA pgadvisory TO "+role)
		refused("fencing: the role cannot create sequence pgadvisory.fencing_token: it needs CREATE on the database")

		pgtest.Exec(t, tg.DB, "CREATE SEQUENCE pgadvisory.fencing_token")
		refused("fencing: the role lacks USAGE on sequence pgadvisory.fencing_token: an administrator can run: " +
			"GRANT USAGE ON SEQUENCE pgadvisory.fencing_token TO " + role)

		pgtest.Exec(t, tg.DB, "GRANT USAGE ON SEQUENCE pgadvisory.fencing_token TO "+role)
		if first, second := pgToken(t, limited, keys.next()), pgToken(t, limited, keys.next()); first < 1 || second <= first {
			t.Errorf("tokens %d then %d; want them to increase from 1", first, second)
		}
	})
}
