package gooselock_test

// goose's own conformance tests for lockers (lock/locktesting), run on
// both of the package's lockers.

import (
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/pressly/goose/v3/lock/locktesting"

	"github.com/pgadvisory/pgadvisory/integrations/gooselock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestProviderLockingIntegration runs goose's locktesting.TestProviderLocking:
// five Providers, each with a locker of its own on one key, run Up at
// once; exactly one applies every migration, the others none, and all
// end at the latest version without error.
func TestProviderLockingIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				d := pgtest.NewDatabase(t, tg, "gooselock_conformance")
				locktesting.TestProviderLocking(t, func(t *testing.T) *goose.Provider {
					return newProvider(t, d.DB, plainMigrations, k.option(t, gooselock.DefaultKey))
				})
				for v, n := range versionCounts(t, d.DB) {
					if n != 1 {
						t.Errorf("version %d recorded %d times; want once", v, n)
					}
				}
				pgtest.AwaitFree(t, d.DB, gooselock.DefaultKey)
			})
		}
	})
}

// TestConcurrentLockingIntegration runs goose's
// locktesting.TestConcurrentLocking on the Locker, the package's
// lock.Locker: of five Lockers on one key that try at once, each within
// 2 s, exactly one gets the lock. (locktesting has no such test for a
// lock.SessionLocker.) The test itself holds the winner's lock for twice
// the bound.
func TestConcurrentLockingIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		d := pgtest.NewDatabase(t, tg, "gooselock_concurrent")
		locktesting.TestConcurrentLocking(t, d.DB, func(t *testing.T) lock.Locker {
			l, err := gooselock.NewLocker(gooselock.DefaultKey)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, 2*time.Second)
		pgtest.AwaitFree(t, d.DB, gooselock.DefaultKey)
	})
}
