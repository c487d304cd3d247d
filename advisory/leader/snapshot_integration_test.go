package leader_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/leader"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// errStepDown ends the campaign of TestCandidateHoldsNoSnapshotIntegration
// once its candidate leads.
var errStepDown = errors.New("step down")

// TestCandidateHoldsNoSnapshotIntegration proves that a candidate waiting
// for the leader's key holds back neither VACUUM nor CREATE INDEX
// CONCURRENTLY, and that it leads as soon as the key is free.
func TestCandidateHoldsNoSnapshotIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		key := advisory.PairKey(rand.Int32N(1<<30)+1, 1)
		candidate := func(ctx context.Context, db *sql.DB, _ pgtest.Key, held func()) error {
			err := leader.Run(ctx, db, key, func(context.Context, *advisory.Lease) error {
				held()
				return errStepDown
			})
			if errors.Is(err, errStepDown) {
				return nil
			}
			return err
		}
		vacuumed, handoff := pgtest.RequireNoSnapshotWait(t, tg, key, pgtest.SnapshotCheck{CIC: true}, candidate)
		t.Logf("dead rows removed %v after the delete; the candidate led %v after the key was freed", vacuumed, handoff)
	})
}
