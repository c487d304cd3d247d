package semaphore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// BenchmarkWake measures how soon a waiter takes a slot that frees: the
// time from the slot's Release returning to the waiter's Acquire
// returning, on a semaphore of 3 slots, all held, with one waiter.
//
//   - Queued: the freed slot is the one the waiter waits on, and the server
//     hands it over.
//   - LoneD: the waiter has waited D, and another slot frees; a ring wakes
//     it, or its next statement, which tries every slot, finds the slot:
//     at whole seconds the release falls near the end of one of the
//     waiter's statements.
//   - Crowd: 8 slots, 4 waiters (each waiting at least 1.5 s), and a slot
//     frees that none waits on: the first to enter counts.
//
// Up to twenty semaphores run at once (one per 200 ms of waiting), each a
// round at a time, so that long waits take less time. Each op is one
// round; ns/op includes the wait, and means nothing. It reports the
// wake's p50, p99 and max, and the waiters that rings woke per release
// (woken/release). With PGADVISORY_SLOW_WAKE set to a duration, it logs
// the steps of every round whose wake took longer: the waiter's
// statements and the ring's, timed from the release. docs/recipes.md and
// docs/benchmarks.md give the figures, from 200 rounds, enough for a p99:
//
//	PGADVISORY_TEST_IMAGES=pgadvisory/postgres:15 \
//		go test -run '^$' -bench 'Wake/pg15/.*/(Queued|Lone)' -benchtime=200x -timeout 20m ./advisory/semaphore/
//
// At 200 rounds, every case on one server, with both drivers, takes about
// 9½ minutes, most of it spent waiting; two servers take about 19. That
// is more than go test's default -timeout of 10 minutes, and close to the
// 25 minutes after which a container of pgtest's is killed. So run one
// server at a time, with -timeout 20m. A signal that ends the run early,
// such as the SIGTERM of timeout(1), makes pgtest stop the servers, and
// the cases still running or yet to come then fail with "connection reset
// by peer", "unexpected EOF" and "no wake measured". Those errors come
// from the stopped server, not from the semaphore.
func BenchmarkWake(b *testing.B) {
	cases := []struct {
		name       string
		waited     time.Duration
		queued     bool
		n, waiters int
	}{
		{"Queued", 100 * time.Millisecond, true, 3, 1},
		{"Lone100ms", 100 * time.Millisecond, false, 3, 1},
		{"Lone1s", time.Second, false, 3, 1},
		{"Lone4s", 4 * time.Second, false, 3, 1},
		{"Lone8s", 8 * time.Second, false, 3, 1},
		{"Crowd", 1500 * time.Millisecond, false, 8, 4},
	}
	for _, s := range pgtest.Servers(b) {
		for _, d := range pgtest.Drivers {
			db := s.Open(b, d)
			for _, c := range cases {
				b.Run(s.Name+"/"+d+"/"+c.name, func(b *testing.B) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					defer cancel()
					// Up to twenty at once, one per 200 ms of waiting.
					sems := max(1, min(20, int(c.waited/(200*time.Millisecond))))
					var (
						mu     sync.Mutex
						wakes  []time.Duration
						wakers []*waker
						wg     sync.WaitGroup
						rounds = make(chan struct{}, b.N)
					)
					for range b.N {
						rounds <- struct{}{}
					}
					close(rounds)
					for i := range min(sems, b.N) {
						wg.Go(func() {
							time.Sleep(time.Duration(i) * c.waited / time.Duration(sems))
							w, err := newWaker(ctx, db, c.n)
							if err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							wakers = append(wakers, w)
							mu.Unlock()
							for range rounds {
								d, err := w.round(ctx, c.waited, c.queued, c.waiters)
								if err != nil {
									b.Error(err)
									return
								}
								mu.Lock()
								wakes = append(wakes, d)
								mu.Unlock()
							}
						})
					}
					wg.Wait()
					b.StopTimer()
					var woken, failed int64
					for _, w := range wakers {
						woken += w.settle()
						for _, l := range w.slow {
							b.Logf("slow wake %s", l)
						}
						failed += w.failed.Load()
						w.close(ctx)
					}
					if failed > 0 {
						b.Errorf("%d rings failed", failed)
					}
					if len(wakes) == 0 {
						b.Fatal("no wake measured")
					}
					slices.Sort(wakes)
					ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
					b.ReportMetric(ms(percentile(wakes, 50)), "p50-ms")
					b.ReportMetric(ms(percentile(wakes, 99)), "p99-ms")
					b.ReportMetric(ms(wakes[len(wakes)-1]), "max-ms")
					b.ReportMetric(float64(woken)/float64(len(wakes)), "woken/release")
				})
			}
		}
	}
}
