package keyspace_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of Registry.Sync. Each runs in a database of its own
// (see pgtest.NewDatabase), so the dictionary table is the test's alone.

// syncRow is a row of the dictionary table.
type syncRow struct {
	advisory.Namespace
	By string
}

func (r syncRow) String() string {
	return fmt.Sprintf("%d %q owner=%q doc=%q by=%q", r.ID, r.Name, r.Owner, r.Doc, r.By)
}

// syncReadTable returns the rows of table, by ID, and when each was last
// updated.
func syncReadTable(t *testing.T, db *sql.DB, table string) ([]syncRow, map[int32]time.Time) {
	t.Helper()
	rows, err := db.QueryContext(context.Background(),
		"SELECT id, name, owner, doc, registered_by, updated_at FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	defer rows.Close()
	var out []syncRow
	updated := make(map[int32]time.Time)
	for rows.Next() {
		var r syncRow
		var at time.Time
		if err := rows.Scan(&r.ID, &r.Name, &r.Owner, &r.Doc, &r.By, &at); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		updated[r.ID] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, updated
}

// syncLibrary is the library's own row.
var syncLibrary = syncRow{advisory.Namespace{ID: math.MinInt32, Name: "pgadvisory", Owner: "github.com/pgadvisory/pgadvisory",
	Doc: "keys the pgadvisory library takes for itself; 1 serialises Registry.Sync"}, "pgadvisory"}

// TestSyncConcurrentIntegration starts eight services at once on a
// database without a dictionary table. Each syncs its own namespaces, one
// namespace they all share, and two of them claim one ID under different
// names. The table ends up holding every namespace of every service that
// synced, exactly one of the two claimants gets a conflict naming both,
// and nobody trips over the table's creation.
func TestSyncConcurrentIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "sync-concurrent")
		common := advisory.Namespace{ID: 999, Name: "common", Owner: "platform"}

		const services = 8
		regs := make([]*keyspace.Registry, services)
		for g := range services {
			regs[g] = &keyspace.Registry{}
			regs[g].MustRegister(common)
			regs[g].MustRegister(advisory.Namespace{ID: int32(1000 + g), Name: fmt.Sprintf("svc-%d", g), Owner: fmt.Sprintf("team-%d", g)})
		}
		// Service 7 also claims service 6's ID under another name.
		regs[7].MustRegister(advisory.Namespace{ID: 1006, Name: "intruder", Owner: "team-7"})

		errs := make([]error, services)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range services {
			wg.Go(func() {
				<-start
				errs[g] = regs[g].Sync(ctx, tg.DB, keyspace.RegisteredBy(fmt.Sprintf("service-%d", g)))
			})
		}
		close(start)
		wg.Wait()

		var failed []int
		for g, err := range errs {
			if err == nil {
				continue
			}
			failed = append(failed, g)
			if !errors.Is(err, keyspace.ErrConflict) {
				t.Errorf("service %d: Sync = %v; want only namespace conflicts", g, err)
			}
			for _, s := range []string{`1006 "svc-6"`, `1006 "intruder"`} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("service %d: conflict %q does not name %s", g, err, s)
				}
			}
		}
		if len(failed) != 1 || (failed[0] != 6 && failed[0] != 7) {
			t.Fatalf("services %v failed; want exactly one of 6 and 7", failed)
		}

		// Every namespace of every service that synced is there.
		want := map[int32]advisory.Namespace{syncLibrary.ID: syncLibrary.Namespace}
		for g, reg := range regs {
			if g == failed[0] {
				continue
			}
			for _, ns := range reg.Namespaces() {
				want[ns.ID] = ns
			}
		}
		got, _ := syncReadTable(t, tg.DB, keyspace.DefaultTable)
		if len(got) != len(want) {
			t.Errorf("table has %d rows, want %d:\n%v", len(got), len(want), got)
		}
		for _, r := range got {
			if want[r.ID] != r.Namespace {
				t.Errorf("row %v; want %+v", r, want[r.ID])
			}
		}
	})
}

// TestSyncIntegration checks what Sync writes, and what it leaves alone,
// in a table named by Table in another schema.
func TestSyncIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "sync")
		pgtest.Exec(t, tg.DB, "CREATE SCHEMA ops")
		const table = `ops."Lock_Keys"`
		opt := keyspace.Table("ops.Lock_Keys")

		billing := advisory.Namespace{ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs"}
		reports := advisory.Namespace{ID: -3, Name: "reports", Owner: "team-bi", Doc: "it's a \"quoted\"; doc"}
		var api keyspace.Registry
		api.MustRegister(billing)
		api.MustRegister(reports)
		if err := api.Sync(ctx, tg.DB, opt, keyspace.RegisteredBy("billing-api")); err != nil {
			t.Fatal(err)
		}
		wantRows := []syncRow{syncLibrary, {reports, "billing-api"}, {billing, "billing-api"}}
		got, updated := syncReadTable(t, tg.DB, table)
		if fmt.Sprint(got) != fmt.Sprint(wantRows) {
			t.Fatalf("table =\n%v\nwant\n%v", got, wantRows)
		}

		t.Run("Idempotent", func(t *testing.T) {
			if err := api.Sync(ctx, tg.DB, opt, keyspace.RegisteredBy("billing-api")); err != nil {
				t.Fatal(err)
			}
			again, updatedAgain := syncReadTable(t, tg.DB, table)
			if fmt.Sprint(again) != fmt.Sprint(wantRows) || fmt.Sprint(updatedAgain) != fmt.Sprint(updated) {
				t.Errorf("a second Sync changed the table:\n%v %v\nwant\n%v %v", again, updatedAgain, wantRows, updated)
			}
		})

		t.Run("AnotherServiceSharesANamespace", func(t *testing.T) {
			// Same ID and name: the same namespace. Its row stays the
			// first service's.
			var worker keyspace.Registry
			worker.MustRegister(advisory.Namespace{ID: 7, Name: "billing", Owner: "someone-else"})
			worker.MustRegister(advisory.Namespace{ID: 8, Name: "payouts"})
			if err := worker.Sync(ctx, tg.DB, opt, keyspace.RegisteredBy("billing-worker")); err != nil {
				t.Fatal(err)
			}
			got, _ := syncReadTable(t, tg.DB, table)
			want := append(slices.Clone(wantRows), syncRow{advisory.Namespace{ID: 8, Name: "payouts"}, "billing-worker"})
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("table =\n%v\nwant\n%v", got, want)
			}
		})

		t.Run("OwnRowsUpdated", func(t *testing.T) {
			var api2 keyspace.Registry
			moved := billing
			moved.Owner, moved.Doc = "team-ledger", "invoice and credit-note runs"
			api2.MustRegister(moved)
			if err := api2.Sync(ctx, tg.DB, opt, keyspace.RegisteredBy("billing-api")); err != nil {
				t.Fatal(err)
			}
			got, after := syncReadTable(t, tg.DB, table)
			i := slices.IndexFunc(got, func(r syncRow) bool { return r.ID == 7 })
			if i < 0 || got[i].Namespace != moved || !after[7].After(updated[7]) {
				t.Errorf("row 7 = %v (updated %v, was %v); want %+v, updated later", got, after[7], updated[7], moved)
			}
			if len(got) != 4 {
				t.Errorf("rows = %v; want 4, none lost", got)
			}
		})

		t.Run("ConflictWritesNothing", func(t *testing.T) {
			before, _ := syncReadTable(t, tg.DB, table)
			var rogue keyspace.Registry
			rogue.MustRegister(advisory.Namespace{ID: 50, Name: "fresh"})
			rogue.MustRegister(advisory.Namespace{ID: 7, Name: "ledger", Owner: "team-rogue"})
			rogue.MustRegister(advisory.Namespace{ID: 51, Name: "reports", Owner: "team-rogue"})
			err := rogue.Sync(ctx, tg.DB, opt, keyspace.RegisteredBy("rogue"))
			if !errors.Is(err, keyspace.ErrConflict) {
				t.Fatalf("Sync = %v; want ErrConflict", err)
			}
			for _, s := range []string{`ID 7 is already 7 "billing"`, `registered by "billing-api"`, `cannot register 7 "ledger" (owner team-rogue)`,
				`name "reports" is already -3 "reports"`, `cannot register 51 "reports"`, "2 namespace conflicts"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			var ce *keyspace.ConflictError
			if !errors.As(err, &ce) || ce.RegisteredBy != "billing-api" || ce.Existing.ID != 7 {
				t.Errorf("ConflictError = %+v", ce)
			}
			after, _ := syncReadTable(t, tg.DB, table)
			if fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("a failed Sync changed the table:\n%v\nwant\n%v", after, before)
			}
		})

		t.Run("RoleWithoutCreate", func(t *testing.T) {
			// Once the table exists, a role that may read and write it,
			// but not create anything in its schema, can sync.
			role := pgtest.UniqueName("pgadvisory_sync_")
			pgtest.Exec(t, tg.DB, "CREATE ROLE "+role+" LOGIN")
			t.Cleanup(func() {
				for _, stmt := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
					if _, err := tg.DB.ExecContext(ctx, stmt); err != nil {
						t.Errorf("%s: %v", stmt, err)
					}
				}
			})
			pgtest.Exec(t, tg.DB, "GRANT USAGE ON SCHEMA ops TO "+role)
			pgtest.Exec(t, tg.DB, "GRANT SELECT, INSERT, UPDATE ON "+table+" TO "+role)
			limited := tg.Server.WithDSN(t, func(u *url.URL) { u.User = url.User(role) }).Open(t, tg.Driver)

			var svc keyspace.Registry
			svc.MustRegister(advisory.Namespace{ID: 70, Name: "least-privilege"})
			if err := svc.Sync(ctx, limited, opt, keyspace.RegisteredBy("least-privilege")); err != nil {
				t.Fatalf("Sync as a role without CREATE: %v", err)
			}
			got, _ := syncReadTable(t, tg.DB, table)
			if i := slices.IndexFunc(got, func(r syncRow) bool { return r.ID == 70 }); i < 0 {
				t.Errorf("rows = %v; want 70", got)
			}
		})

		t.Run("DefaultRegisteredBy", func(t *testing.T) {
			// Without RegisteredBy, the session's application_name
			// ("sync", set by pgtest.NewDatabase) is recorded.
			var svc keyspace.Registry
			svc.MustRegister(advisory.Namespace{ID: 60, Name: "by-app-name"})
			if err := svc.Sync(ctx, tg.DB, opt); err != nil {
				t.Fatal(err)
			}
			got, _ := syncReadTable(t, tg.DB, table)
			if i := slices.IndexFunc(got, func(r syncRow) bool { return r.ID == 60 }); i < 0 || got[i].By != "sync" {
				t.Errorf("rows = %v; want 60 registered by %q", got, "sync")
			}
		})
	})
}
