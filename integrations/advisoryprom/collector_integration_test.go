package advisoryprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/integrations/advisoryprom"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the collector. Advisory locks belong to a
// database, and the collector reads the current one: each test runs in a
// database of its own, so that it sees its own locks and no other test's.

// TestCollectorIntegration holds exclusive and shared session locks, a
// transaction lock, and waits that form a blocking chain (a blocks d,
// which blocks e), with idle holders, and checks every value a scrape
// reports, as Prometheus would read it.
func TestCollectorIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, pgtest.UniqueName("advisoryprom-"))

		var reg keyspace.Registry
		billing := reg.MustRegister(advisory.Namespace{ID: 4242, Name: "billing"})
		reports := reg.MustRegister(advisory.Namespace{ID: 4343, Name: "reports"})
		c := advisoryprom.NewCollector(tg.DB, advisoryprom.WithRegistry(&reg))

		// Nothing held: every lock gauge is absent, the totals are 0.
		empty := scrape(t, c)
		for _, want := range []struct {
			name string
			v    float64
		}{{"pgadvisory_up", 1}, {"pgadvisory_blocked_sessions", 0}, {"pgadvisory_idle_holding_sessions", 0}, {"pgadvisory_longest_idle_hold_seconds", 0}} {
			if got, ok := empty.value(want.name); !ok || got != want.v {
				t.Errorf("no locks: %s = %v (present %v), want %v\n%s", want.name, got, ok, want.v, empty)
			}
		}
		for _, name := range []string{"pgadvisory_locks", "pgadvisory_oldest_hold_seconds", "pgadvisory_longest_wait_seconds"} {
			if n := empty.series(name); n != 0 {
				t.Errorf("no locks: %d series of %s\n%s", n, name, empty)
			}
		}

		start := time.Now()
		a, b, cc, d, e, f, g := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB),
			pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
		night, morning, daily := billing.Key(1), billing.Key(2), reports.Key(1)
		for _, err := range []error{
			advisory.Lock(ctx, a, night),                // a: exclusive, then idle
			advisory.LockShared(ctx, b, daily),          // b and c share, then idle
			advisory.LockShared(ctx, cc, daily),         //
			advisory.Lock(ctx, d, morning),              // d holds morning, waits for night below
			advisory.Lock(ctx, a, advisory.Int64Key(5)), // a bigint key: namespace ""
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		// f: a transaction lock, idle in its transaction: not an idle
		// holder of a session lock.
		tx, err := f.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		if err := advisory.XactLock(ctx, tx, advisory.Int64Key(6)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, d, night, false)   // d waits for a
		waitFor(t, e, morning, false) // e waits for d: the chain a -> d -> e
		waitFor(t, g, night, true)    // g waits, shared, for a

		var got exposition
		pgtest.Await(t, "three sessions to wait", func() (bool, error) {
			got = scrape(t, c)
			n, _ := got.value("pgadvisory_blocked_sessions")
			return n == 3, nil
		})
		elapsed := time.Since(start).Seconds()

		for _, want := range []struct {
			labels []string
			n      float64
		}{
			{[]string{"namespace=billing", "mode=exclusive", "state=held"}, 2},    // a's night, d's morning
			{[]string{"namespace=billing", "mode=exclusive", "state=waiting"}, 2}, // d, e
			{[]string{"namespace=billing", "mode=shared", "state=waiting"}, 1},    // g
			{[]string{"namespace=reports", "mode=shared", "state=held"}, 2},       // b, c
			{[]string{"namespace=", "mode=exclusive", "state=held"}, 2},           // a's 5, f's 6
		} {
			if v, ok := got.value("pgadvisory_locks", want.labels...); !ok || v != want.n {
				t.Errorf("pgadvisory_locks%v = %v (present %v), want %v", want.labels, v, ok, want.n)
			}
		}
		if n := got.series("pgadvisory_locks"); n != 5 {
			t.Errorf("%d series of pgadvisory_locks, want 5", n)
		}
		for _, want := range []struct {
			name string
			v    float64
		}{
			{"pgadvisory_up", 1},
			{"pgadvisory_blocked_sessions", 3},      // d, e, g
			{"pgadvisory_idle_holding_sessions", 3}, // a, b, c; f is in a transaction, d waits
		} {
			if v, ok := got.value(want.name); !ok || v != want.v {
				t.Errorf("%s = %v (present %v), want %v", want.name, v, ok, want.v)
			}
		}
		// Ages: positive, and no older than the test's locks. The
		// server's clock is this machine's.
		ages := []struct {
			name   string
			labels []string
		}{
			{"pgadvisory_oldest_hold_seconds", []string{"namespace=billing"}},
			{"pgadvisory_oldest_hold_seconds", []string{"namespace=reports"}},
			{"pgadvisory_oldest_hold_seconds", []string{"namespace="}},
			{"pgadvisory_longest_wait_seconds", []string{"namespace=billing"}},
			{"pgadvisory_longest_idle_hold_seconds", nil},
		}
		for _, age := range ages {
			if v, ok := got.value(age.name, age.labels...); !ok || v <= 0 || v > elapsed+1 {
				t.Errorf("%s%v = %v (present %v), want in (0, %.3f]", age.name, age.labels, v, ok, elapsed+1)
			}
		}
		for _, absent := range []string{"namespace=reports", "namespace="} {
			if v, ok := got.value("pgadvisory_longest_wait_seconds", absent); ok {
				t.Errorf("pgadvisory_longest_wait_seconds{%s} = %v, but nobody waits there", absent, v)
			}
		}
		if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %v", problems, err)
		}
		t.Logf("scrape:\n%s", got)
	})
}
