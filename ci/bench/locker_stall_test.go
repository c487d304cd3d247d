package bench_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// stallFor is how long each phase of a stall run samples LOCK TABLE.
const stallFor = 3 * time.Second

// BenchmarkLockerStall measures how long each kind of heartbeat stalls
// another session's LOCK TABLE while a Locker holds 1,000, 10,000 and
// 100,000 leases (PGADVISORY_SCALING_MAX lowers the top), on a
// connection per 1,000 of them. One session sends a heartbeat's
// statement over and over, as fast as it is answered: the count that
// reads pg_locks (sqltext.CarrierCount), or the beat between that proves
// the session and its mark (sqltext.CarrierAlive), on a session bearing
// a mark of its own, so that the statement does all its work. Meanwhile
// another session takes an ACCESS EXCLUSIVE lock on a table, as LOCK
// TABLE does, in a function that returns how long the LOCK TABLE took
// on the server, one transaction at a time for 3 s; and again with no
// heartbeat running, for the baseline. Reading pg_locks holds every
// lock-manager partition while it copies the lock table, and a LOCK
// TABLE in a strong mode needs one of them. It reports the heartbeat's
// own time on the client (hb-µs), and the LOCK TABLE's p50, p99 and
// greatest time in each phase:
//
//	go test -run '^$' -bench LockerStall -benchtime=1x .
func BenchmarkLockerStall(b *testing.B) {
	servers := pgtest.StartServer(b, "-c", scalingLocks)
	if len(servers) == 0 {
		b.Skip("PGADVISORY_TEST_DSN names existing servers: the stall runs need a dedicated one")
	}
	for _, s := range servers {
		obs := s.Open(b, pgtest.DriverPQ)
		table := pgtest.UniqueName("public.stall_")
		fn := table + "_lock"
		pgtest.Exec(b, obs, "CREATE TABLE "+table+" ()")
		pgtest.Exec(b, obs, "CREATE FUNCTION "+fn+"() RETURNS pg_catalog.float8 LANGUAGE plpgsql AS $$"+
			" DECLARE t0 pg_catalog.timestamptz := pg_catalog.clock_timestamp();"+
			" BEGIN LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE;"+
			" RETURN pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - t0) * 1e6; END $$")
		for _, n := range scalingKeys(b) {
			if n != 1_000 && n != 10_000 && n != 100_000 {
				continue
			}
			b.Run(fmt.Sprintf("%s/keys=%d", s.Name, n), func(b *testing.B) {
				db := s.Open(b, pgtest.DriverPQ)
				conns := max(4, n/1000)
				db.SetMaxOpenConns(conns + 8)
				db.SetMaxIdleConns(conns + 8)
				for range b.N {
					stallRun(b, db, n, conns, fn)
				}
			})
		}
	}
}

// stallRun holds n leases on conns connections of db and measures the
// stall of each heartbeat, as BenchmarkLockerStall says.
func stallRun(b *testing.B, db *sql.DB, n, conns int, fn string) {
	ctx := context.Background()
	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: conns})
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Close(ctx)
	base := rand.Int64N(1<<40) << 20
	ls := make([]*advisory.Lease, n)
	if onGoroutines(n, func(i int) error {
		l, err := lk.Acquire(ctx, advisory.Int64Key(base+int64(i)), advisory.Try())
		ls[i] = l
		return err
	}) < 0 {
		b.Fatal("an acquisition failed")
	}
	defer onGoroutines(n, func(i int) error { return ls[i].Release(ctx) })

	beat := pgtest.Conn(b, db)
	var pid, mark int64
	if err := beat.QueryRowContext(ctx, "SELECT pg_catalog.pg_backend_pid(), "+
		"pg_catalog.set_config('pgadvisory.lease', '77', false)::pg_catalog.int8").Scan(&pid, &mark); err != nil {
		b.Fatal(err)
	}
	lock := pgtest.Conn(b, db)
	phases := []struct{ name, stmt string }{
		{"idle", ""},
		{"count", sqltext.CarrierCount(pid, mark)},
		{"alive", sqltext.CarrierAlive(pid, mark)},
	}
	for _, ph := range phases {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var beats []time.Duration
		if ph.stmt != "" {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					t0 := time.Now()
					var v int64
					if err := beat.QueryRowContext(ctx, ph.stmt).Scan(&v); err != nil {
						b.Error(err)
						return
					}
					beats = append(beats, time.Since(t0))
				}
			})
		}
		var waits []float64
		for end := time.Now().Add(stallFor); time.Now().Before(end); {
			var us float64
			if err := lock.QueryRowContext(ctx, "SELECT "+fn+"()").Scan(&us); err != nil {
				b.Fatal(err)
			}
			waits = append(waits, us)
		}
		close(stop)
		wg.Wait()
		slices.Sort(waits)
		if ph.stmt != "" {
			slices.Sort(beats)
			b.ReportMetric(float64(beats[len(beats)/2].Microseconds()), ph.name+"-hb-µs")
		}
		b.ReportMetric(waits[len(waits)/2], ph.name+"-lock-p50-µs")
		b.ReportMetric(waits[len(waits)*99/100], ph.name+"-lock-p99-µs")
		b.ReportMetric(waits[len(waits)-1], ph.name+"-lock-max-µs")
	}
}
