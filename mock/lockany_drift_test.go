package mock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// lockAnyDriftCases are the drift cases of the calls that take any of
// several keys, and of CancelWaiters.
func lockAnyDriftCases() []driftCase {
	var cases []driftCase
	add := func(fn, name string, run func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock)) {
		cases = append(cases, driftCase{fn: fn, name: name, run: run})
	}
	sets := []struct {
		name string
		keys []advisory.Key
	}{
		{"Bigints", []advisory.Key{advisory.Int64Key(9), advisory.Int64Key(-1), advisory.Int64Key(42)}},
		{"Pairs", []advisory.Key{advisory.PairKey(7, 3), advisory.PairKey(7, -2), advisory.NameKey(7, "nightly-report")}},
	}
	for _, set := range sets {
		keys := set.keys
		for took := -1; took < len(keys); took++ {
			add("TryLockAny", set.name, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				mock.ExpectTryLockAny(m, took, keys...)
				k, ok, err := advisory.TryLockAny(context.Background(), conn(t, db), keys...)
				if err != nil || ok != (took >= 0) || ok && k != keys[took] {
					t.Errorf("TryLockAny = %v, %t, %v; want place %d", k, ok, err, took)
				}
			})
		}
		for took := range keys {
			add("LockAnyWithin", set.name, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				mock.ExpectLockAnyWithin(m, 250*time.Millisecond, took, keys...)
				k, err := advisory.LockAnyWithin(context.Background(), conn(t, db), 250*time.Millisecond, keys...)
				if err != nil || k != keys[took] {
					t.Errorf("LockAnyWithin = %v, %v; want %v", k, err, keys[took])
				}
			})
		}
		add("CancelWaiters", set.name, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectCancelWaiters(m, keys[0], 4, 2)
			if n, err := advisory.CancelWaiters(context.Background(), conn(t, db), keys[0], 4); n != 2 || err != nil {
				t.Errorf("CancelWaiters = %d, %v; want 2, nil", n, err)
			}
		})
	}
	return cases
}
