package gooselock_test

import (
	"context"
	"database/sql"
	"sort"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/gooselock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestTwoProvidersRaceIntegration runs two Providers, on two pools as two
// processes would, at once on one database. The first to get the lock
// stops in its first migration while the test holds the gate; the test
// sees the other wait for the lock meanwhile. Once the gate opens, the
// winner applies both migrations and the other none, both without error,
// and each migration ran once, on the winner's backend.
func TestTwoProvidersRaceIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				d := pgtest.NewDatabase(t, tg, "gooselock_race")
				open := holdGate(t, d.DB)
				pools := []*sql.DB{d.DB, d.Server.Open(t, d.Driver)}
				type outcome struct {
					i       int
					results []*goose.MigrationResult
					err     error
					version int64
				}
				done := make(chan outcome, 2)
				for i, pool := range pools {
					p := newProvider(t, pool, gatedMigrations, k.option(t, gooselock.DefaultKey))
					go func() {
						res, err := p.Up(context.Background())
						o := outcome{i: i, results: res, err: err}
						if err == nil {
							o.version, o.err = p.GetDBVersion(context.Background())
						}
						done <- o
					}()
				}
				// One Provider holds the lock and waits at the gate; the
				// other waits for the lock.
				pgtest.AwaitWaiting(t, d.DB, gooselock.DefaultKey)
				pgtest.AwaitWaiting(t, d.DB, advisory.Int64Key(gateKey))
				winnerPID := pgtest.AwaitHolder(t, d.DB, gooselock.DefaultKey)
				open()

				applied := map[int]int{}
				for range pools {
					o := <-done
					if o.err != nil {
						t.Fatalf("provider %d: %v", o.i, o.err)
					}
					if o.version != 2 {
						t.Errorf("provider %d: version %d after Up; want 2", o.i, o.version)
					}
					applied[len(o.results)]++
				}
				if applied[2] != 1 || applied[0] != 1 {
					t.Fatalf("providers applied %v migrations (count by number applied); want one applying 2 and one 0", applied)
				}
				for v, n := range versionCounts(t, d.DB) {
					if n != 1 {
						t.Errorf("version %d recorded %d times; want once", v, n)
					}
				}
				var versions []int64
				rows, err := d.DB.Query("SELECT version, pid FROM public.applied")
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				for rows.Next() {
					var v int64
					var pid int
					if err := rows.Scan(&v, &pid); err != nil {
						t.Fatal(err)
					}
					versions = append(versions, v)
					// The SessionLocker's lock is on the session that runs
					// the migrations; the Locker's on one of its own.
					if k.name == "SessionLocker" && pid != winnerPID {
						t.Errorf("migration %d ran on backend %d; the lock was held by %d", v, pid, winnerPID)
					}
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
				if len(versions) != 2 || versions[0] != 1 || versions[1] != 2 {
					t.Errorf("migrations ran %v; want [1 2], each once", versions)
				}
				pgtest.AwaitFree(t, d.DB, gooselock.DefaultKey)
			})
		}
	})
}
