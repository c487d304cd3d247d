package advisory_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of leases and Lockers through a PgBouncer in
// transaction mode that runs DISCARD ALL on every server connection after
// every transaction (TestLeaseIntegration/PoolerReset): the operator's
// remedy when leases cannot be kept off a transaction pooler. DISCARD ALL
// releases every session lock and clears every session setting, the
// lease's mark among them, so no lease can hold past its own statement: a
// lease must be refused at acquisition or lost at its first heartbeat,
// never overlap with a rival, and leave nothing on the server.

// A poolerHeld counts how the holders of one holder and rival fared:
// poolerRun counts the refusals and the losses before the rival; acquired
// counts every lease the holder got, so that the rest held through a
// heartbeat.
type poolerHeld struct {
	acquired int
}

// counting returns h, counting in n each lease its acquire returns.
func (n *poolerHeld) counting(h poolerHolder) poolerHolder {
	return poolerHolder{name: h.name, acquire: func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key) (*advisory.Lease, func(), error) {
		l, end, err := h.acquire(ctx, t, db, key)
		if err == nil {
			n.acquired++
		}
		return l, end, err
	}}
}

// checkResetting checks that the pooler behind db, a pool of pool
// backends, resets a session after each statement: a session lock and a
// mark set through db outside a transaction must be gone from the server
// that direct connects to.
func checkResetting(t *testing.T, db, direct *sql.DB, pool int, key advisory.Key) {
	t.Helper()
	k, _ := key.Int64()
	if _, err := db.ExecContext(context.Background(),
		"SELECT pg_catalog.pg_advisory_lock($1::bigint), pg_catalog.set_config('pgadvisory.lease', '1', false)", k); err != nil {
		t.Fatal(err)
	}
	if held := awaitKeysFree(direct, []advisory.Key{key}, false); len(held) > 0 {
		t.Fatalf("a session lock taken through the resetting PgBouncer stayed held: %v", held)
	}
	if marks := poolerMarks(t, db, pool); len(marks) > 0 {
		t.Fatalf("a session setting made through the resetting PgBouncer stayed: %v", marks)
	}
}

// testLeasePoolerReset runs the holders and rivals of testLeasePooler
// through a PgBouncer that resets every server connection after every
// transaction ([pgtest.Server.PgBouncerResetting]), with pool sizes 1 to
// 4, quiet and then busy as there. It requires that no rival hold the
// key while the holder believes it holds it, that no holder hold through
// a heartbeat, and that after each phase no key stay held and no pooled
// backend bear a mark. It logs how many holders were refused at
// acquisition and how many were lost at their first heartbeat, for
// docs/leases.md.
func testLeasePoolerReset(t *testing.T) {
	runs := poolerRuns()
	for _, srv := range pgtest.Servers(t) {
		direct := srv.Open(t, pgtest.DriverPQ)
		for pool := 1; pool <= 4; pool++ {
			for _, d := range pgtest.Drivers {
				t.Run(fmt.Sprintf("%s/Pool%d/%s", srv.Name, pool, d), func(t *testing.T) {
					t.Parallel()
					bouncer := srv.PgBouncerResetting(t, pool)
					dbA, dbB := bouncer.Open(t, d), bouncer.Open(t, d)
					keys := newPGKeys()
					checkResetting(t, dbA, direct, pool, keys.next())
					for _, busy := range []bool{false, true} {
						var used []advisory.Key
						load := "Quiet"
						stop := make(chan struct{})
						var noise *sync.WaitGroup
						if busy {
							load = "Busy"
							noise = poolerNoise(bouncer.Open(t, d), 2, stop)
						}
						var sum poolerCount
						var sumHeld poolerHeld
						for _, h := range poolerHolders {
							for _, r := range poolerRivals {
								var c poolerCount
								var n poolerHeld
								for range runs {
									k := keys.next()
									used = append(used, k)
									poolerRun(t, n.counting(h), r, k, dbA, dbB, &c)
								}
								t.Logf("%s: holder %s, rival %s: %v", load, h.name, r.name, c)
								if c.overlaps > 0 {
									t.Errorf("%s: holder %s, rival %s: the rival held the key while the holder believed it held it, %d of %d runs",
										load, h.name, r.name, c.overlaps, c.runs)
								}
								if held := n.acquired - c.lostAlone; held > 0 {
									t.Errorf("%s: holder %s, rival %s: the holder's lease held through a heartbeat in %d of %d runs, through a pooler that discards every session",
										load, h.name, r.name, held, c.runs)
								}
								sum.runs += c.runs
								sum.refused += c.refused
								sum.lostAlone += c.lostAlone
								sum.overlaps += c.overlaps
								sum.ended += c.ended
								sumHeld.acquired += n.acquired
							}
						}
						close(stop)
						if noise != nil {
							noise.Wait()
						}
						held := awaitKeysFree(direct, used, false)
						marks := poolerMarks(t, dbA, pool)
						t.Logf("%s: totals: %d runs: holder refused %d, holder lost at its first heartbeat %d, holder held %d, "+
							"overlaps %d, a backend ended under a call %d; after every lease was released: %d of %d keys still held, %d of %d pooled backends marked",
							load, sum.runs, sum.refused, sum.lostAlone, sumHeld.acquired-sum.lostAlone,
							sum.overlaps, sum.ended, len(held), len(used), len(marks), pool)
						if len(held) > 0 {
							t.Errorf("%s: after every lease was released: %d keys still held: %v", load, len(held), held)
						}
						if len(marks) > 0 {
							t.Errorf("%s: after every lease was released: %d pooled backends bear a lease's mark: %v", load, len(marks), marks)
						}
					}
				})
			}
		}
	}
}
