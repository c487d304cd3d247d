package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// A mutual-exclusion run under chaos (the Chaos and ChaosRestartPause
// subtests of TestLeaseIntegration): goroutines take leases with fencing
// tokens on a few keys while their backends are terminated at random. The
// protected work is a write that a table accepts only with a token higher
// than the last it accepted, as a store that fences its writers does. No
// stale write may be accepted, and every refused write must come from a
// lease that then reports itself lost.

const (
	chaosWorkers   = 32
	chaosKeys      = 4
	chaosHeartbeat = 100 * time.Millisecond
	chaosDuration  = 3 * time.Second
)

func testLeaseChaos(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		// Not parallel: 32 leases hold 32 sessions of the shared server.
		app := pgtest.UniqueName("advisory-")
		db := pgtest.OpenApp(t, tg, app) // the leases, whose backends the chaos terminates
		leaseChaos(t, db, tg.DB, app, false, func(stop time.Time) string {
			terminated := 0
			for time.Now().Before(stop) {
				time.Sleep(time.Duration(50+mrand.IntN(100)) * time.Millisecond)
				if chaosTerminate(t, tg.DB, app) {
					terminated++
				}
			}
			if terminated == 0 {
				t.Error("nothing to prove: no backend terminated")
			}
			return fmt.Sprintf("%d backends terminated", terminated)
		})
	})
}

// testLeaseChaosRestartPause is the same run on a dedicated
// server that the chaos also restarts and freezes, one driver at a time.
// While the server is down or frozen, writes and acquisitions fail; no
// stale write may be accepted all the same.
func testLeaseChaosRestartPause(t *testing.T) {
	for _, s := range pgtest.StartServer(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for _, driver := range pgtest.Drivers {
				t.Run(driver, func(t *testing.T) {
					app := pgtest.UniqueName("advisory-")
					tg := pgtest.Target{Server: s, Driver: driver, DB: s.Open(t, driver)}
					db := pgtest.OpenApp(t, tg, app)
					leaseChaos(t, db, tg.DB, app, true, func(stop time.Time) string {
						var terminated, restarts, pauses int
						// Calm first, so that the leases have written
						// before the first outage: a restart early in
						// the run could leave nothing to judge.
						time.Sleep(700 * time.Millisecond)
						for time.Now().Before(stop) {
							time.Sleep(time.Duration(200+mrand.IntN(300)) * time.Millisecond)
							switch mrand.IntN(4) {
							case 0:
								s.Restart(t)
								restarts++
							case 1:
								unpause := s.Pause(t)
								time.Sleep(time.Duration(100+mrand.IntN(300)) * time.Millisecond)
								unpause()
								pauses++
							default:
								if chaosTerminate(t, tg.DB, app) {
									terminated++
								}
							}
						}
						return fmt.Sprintf("%d backends terminated, %d restarts, %d pauses", terminated, restarts, pauses)
					})
				})
			}
		})
	}
}

// chaosTerminate terminates the backend of a random lease of app, and
// reports whether there was one. A failure to ask, as while the server
// restarts, is no failure of the test.
func chaosTerminate(t *testing.T, obs *sql.DB, app string) bool {
	t.Helper()
	var pid int
	err := obs.QueryRowContext(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1
		AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted) ORDER BY random() LIMIT 1`, app).Scan(&pid)
	if err != nil {
		return false // none holds a lease at the moment
	}
	_, err = obs.ExecContext(context.Background(), "SELECT pg_terminate_backend($1)", pid)
	return err == nil
}

// leaseChaos runs 32 workers that take leases with fencing tokens on 4 keys
// of db, and write through a fence in obs, while chaos runs until the stop
// time it is given and describes what it did. With outages, the server may
// go away: failed acquisitions and writes are then part of the run.
func leaseChaos(t *testing.T, db, obs *sql.DB, app string, outages bool, chaos func(stop time.Time) string) {
	t.Helper()
	ctx := context.Background()
	table := "lease_chaos_" + app[len("advisory-"):]
	pgtest.Exec(t, obs, "CREATE TABLE "+table+" (key bigint PRIMARY KEY, token bigint NOT NULL)")
	pgtest.Exec(t, obs, "CREATE TABLE "+table+"_log (seq bigserial PRIMARY KEY, key bigint NOT NULL, token bigint NOT NULL)")
	t.Cleanup(func() {
		_, _ = obs.ExecContext(context.Background(), "DROP TABLE "+table+", "+table+"_log")
	})
	keys := newPGKeys()
	var ks []advisory.Key
	for i := range chaosKeys {
		ks = append(ks, keys.next())
		pgtest.Exec(t, obs, "INSERT INTO "+table+" VALUES ($1, 0)", i)
	}
	// write is the protected work: accepted only with a token above
	// the last accepted one, and logged in the same statement.
	write := "WITH u AS (UPDATE " + table + " SET token = $2 WHERE key = $1 AND token < $2 RETURNING key, token) " +
		"INSERT INTO " + table + "_log (key, token) SELECT key, token FROM u"

	var (
		mu       sync.Mutex
		tokens   = map[int]map[int64]bool{} // per key, every token handed out
		accepted int
		refused  int
		lost     int
		failed   int // writes the server did not answer, in outages
	)
	warmPool(t, db, chaosWorkers)
	stop := time.Now().Add(chaosDuration)
	var wg sync.WaitGroup
	for w := range chaosWorkers {
		wg.Go(func() {
			rnd := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for time.Now().Before(stop) {
				ki := rnd.IntN(chaosKeys)
				actx, cancel := context.WithTimeout(ctx, time.Second)
				l, err := advisory.Acquire(actx, db, ks[ki], advisory.Fencing(), advisory.Heartbeat(chaosHeartbeat))
				cancel()
				if err != nil {
					// A wait may time out, and the chaos may end the
					// session while Acquire works on it, or take the
					// server away: then nothing is held, and the
					// worker tries again.
					if !outages && !errors.Is(err, context.DeadlineExceeded) && pgSQLState(err) != "57P01" {
						t.Errorf("worker %d: Acquire: %v", w, err)
						return
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				mu.Lock()
				if tokens[ki] == nil {
					tokens[ki] = map[int64]bool{}
				}
				if tokens[ki][l.Token()] {
					t.Errorf("token %d handed out twice for key %d", l.Token(), ki)
				}
				tokens[ki][l.Token()] = true
				mu.Unlock()
				// A holder that works without looking at its
				// lease: the store is what stops it.
				time.Sleep(time.Duration(rnd.IntN(300)) * time.Millisecond)
				res, err := obs.ExecContext(ctx, write, ki, l.Token())
				if err != nil {
					if !outages {
						t.Errorf("worker %d: write: %v", w, err)
						return
					}
					// The server went away under the write.
					_ = l.Release(ctx)
					mu.Lock()
					failed++
					mu.Unlock()
					continue
				}
				n, _ := res.RowsAffected()
				refusedAt := time.Now()
				if n == 0 {
					// Someone wrote with a later token, so
					// someone took the key after this lease:
					// it must learn that it was lost.
					select {
					case <-l.Done():
					case <-time.After(leaseBound(chaosHeartbeat)):
						t.Errorf("worker %d: write with token %d refused, but the lease is not lost %v later", w, l.Token(), time.Since(refusedAt))
					}
					if !errors.Is(l.Err(), advisory.ErrLockLost) {
						t.Errorf("worker %d: write with token %d refused; lease Err = %v, want ErrLockLost", w, l.Token(), l.Err())
					}
				}
				rerr := l.Release(ctx)
				mu.Lock()
				if n == 0 {
					refused++
				} else {
					accepted++
				}
				if errors.Is(rerr, advisory.ErrLockLost) {
					lost++
				}
				mu.Unlock()
				if rerr != nil && !errors.Is(rerr, advisory.ErrLockLost) {
					t.Errorf("worker %d: Release: %v", w, rerr)
				}
			}
		})
	}
	what := chaos(stop)
	wg.Wait()

	// Per key, the accepted tokens strictly increase in the order the
	// store accepted them.
	rows, err := obs.QueryContext(ctx, "SELECT key, token FROM "+table+"_log ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	last := map[int]int64{}
	var logged int
	for rows.Next() {
		var k int
		var tok int64
		if err := rows.Scan(&k, &tok); err != nil {
			t.Fatal(err)
		}
		if tok <= last[k] {
			t.Errorf("stale write accepted on key %d: token %d after %d", k, tok, last[k])
		}
		last[k] = tok
		logged++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	// A write whose answer an outage lost may have been accepted.
	if logged < accepted || !outages && logged != accepted {
		t.Errorf("%d writes accepted, %d logged", accepted, logged)
	}
	for _, k := range ks {
		pgtest.AwaitFree(t, obs, k)
	}
	if accepted == 0 {
		t.Errorf("nothing to prove: %d writes accepted", accepted)
	}
	t.Logf("lease chaos: %s; %d writes accepted, %d refused (each from a lease then reported lost), %d failed in outages, %d leases lost; 0 stale writes accepted",
		what, accepted, refused, failed, lost)
}

// warmPool opens n of db's connections before a chaos run and keeps them
// idle in its pool, so that the run's first acquisitions need not dial.
// Under a full parallel suite on a machine of two cores, connecting can
// take longer than an acquisition's one-second deadline; the runs then
// failed for want of anything to prove, before any chaos began. Dialing
// again after a terminated backend or a restart stays part of the run.
func warmPool(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	db.SetMaxIdleConns(n)
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.PollTimeout)
	defer cancel()
	conns := make([]*sql.Conn, 0, n)
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("warming the pool: %v", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.Close()
	}
}
