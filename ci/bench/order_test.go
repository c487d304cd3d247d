package bench_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// orderWaiters is how many waiters queue for the key in BenchmarkWaitOrder.
const orderWaiters = 8

// An orderCase is how long each waiter holds the key once it has it, and
// how many handoffs to count. With 8 waiters, a hold of 150 ms makes each
// wait about 1.05 s, a slice's length: waiters then run out of slices and
// queue again while they wait.
var orderCases = []struct {
	hold     time.Duration
	handoffs int
}{
	{2 * time.Millisecond, 200},
	{150 * time.Millisecond, 80},
	{400 * time.Millisecond, 40},
}

// BenchmarkWaitOrder measures the order in which waiters queued for one
// key get it: 8 waiters queue one after another, each holds the key for a
// while when it gets it, releases it and queues again, until the key has
// changed hands the case's number of times. A first-come, first-served
// queue serves them in turn, 0 1 … 7 0 1 …; the benchmark reports the
// share of handoffs that went to the waiter next in turn (in-turn) and the
// longest run of a waiter being passed over (skipped-max), for the
// library's sliced wait (advisory.Lock) against one blocking statement by
// hand (SELECT pg_advisory_lock). Run it with -benchtime=1x.
func BenchmarkWaitOrder(b *testing.B) {
	for _, s := range pgtest.Servers(b) {
		for _, driver := range []string{pgtest.DriverPQ, pgtest.DriverPGX} {
			for _, c := range orderCases {
				for _, variant := range []string{"raw", "library"} {
					b.Run(fmt.Sprintf("%s/%s/hold=%v/%s", s.Name, driver, c.hold, variant), func(b *testing.B) {
						db := s.Open(b, driver)
						db.SetMaxOpenConns(orderWaiters + 2)
						for range b.N {
							inTurn, skipped := waitOrder(b, db, variant == "library", c.hold, c.handoffs)
							group := fmt.Sprintf("%s/%s/hold=%v", s.Name, driver, c.hold)
							record("waitorder-inturn", group, variant, inTurn)
							record("waitorder-skipped", group, variant, float64(skipped))
							b.ReportMetric(inTurn, "in-turn")
							b.ReportMetric(float64(skipped), "skipped-max")
						}
					})
				}
			}
		}
	}
}

// waitOrder runs one round of BenchmarkWaitOrder and returns the share of
// handoffs in turn and the longest a waiter was passed over, in handoffs.
func waitOrder(b *testing.B, db *sql.DB, library bool, hold time.Duration, handoffs int) (float64, int) {
	ctx := context.Background()
	key := rand.Int64N(1<<40) + 1
	lock := func(conn *sql.Conn) error {
		if library {
			return advisory.Lock(ctx, conn, advisory.Int64Key(key))
		}
		_, err := conn.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_lock("+strconv.FormatInt(key, 10)+")")
		return err
	}
	unlock := func(conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_unlock("+strconv.FormatInt(key, 10)+")")
		return err
	}
	holder := pgtest.Conn(b, db)
	if err := lock(holder); err != nil {
		b.Fatal(err)
	}

	var mu sync.Mutex
	var served []int
	var wg sync.WaitGroup
	for i := range orderWaiters {
		conn := pgtest.Conn(b, db)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := lock(conn); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				done := len(served) >= handoffs
				if !done {
					served = append(served, i)
				}
				mu.Unlock()
				if !done {
					time.Sleep(hold)
				}
				if err := unlock(conn); err != nil {
					b.Error(err)
					return
				}
				if done {
					return
				}
			}
		}()
		// Queue them one after another.
		awaitWaiters(b, db, key, i+1)
	}
	if err := unlock(holder); err != nil {
		b.Fatal(err)
	}
	wg.Wait()

	inTurn, skipped, last := 0, 0, make([]int, orderWaiters)
	for j := 1; j < len(served); j++ {
		if served[j] == (served[j-1]+1)%orderWaiters {
			inTurn++
		}
		for w := range last {
			if w != served[j] {
				last[w]++
				skipped = max(skipped, last[w]-(orderWaiters-1))
			} else {
				last[w] = 0
			}
		}
	}
	return float64(inTurn) / float64(len(served)-1), skipped
}

// awaitWaiters returns once n sessions wait for key.
func awaitWaiters(b *testing.B, db *sql.DB, key int64, n int) {
	b.Helper()
	pgtest.Await(b, fmt.Sprintf("%d waiters to queue", n), func() (bool, error) {
		locks, err := pgtest.LocksOf(context.Background(), db, advisory.Int64Key(key))
		waiting := 0
		for _, l := range locks {
			if !l.Granted {
				waiting++
			}
		}
		return waiting >= n, err
	})
}
