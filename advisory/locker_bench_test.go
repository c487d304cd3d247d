package advisory_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// BenchmarkLeases compares, in one run, a lease of its own per key
// (advisory.Acquire) with a multiplexed one (Locker.Acquire, on the
// default 4 connections): each operation takes a lease on a key no call
// has used before, with Try, and releases it. It runs at 1, 8 and 64
// goroutines and reports, besides ns/op (the wall time per operation of
// all goroutines together), the throughput in ops/s and each operation's
// p50 and p99 latency. docs/locker.md gives the results:
//
//	go test -run '^$' -bench Leases -benchtime=3000x ./advisory/
func BenchmarkLeases(b *testing.B) {
	variants := []struct {
		name string
		open func(b *testing.B, db *sql.DB) func(ctx context.Context, k advisory.Key) (*advisory.Lease, error)
	}{
		{"lease", func(b *testing.B, db *sql.DB) func(ctx context.Context, k advisory.Key) (*advisory.Lease, error) {
			return func(ctx context.Context, k advisory.Key) (*advisory.Lease, error) {
				return advisory.Acquire(ctx, db, k, advisory.Try())
			}
		}},
		{"locker", func(b *testing.B, db *sql.DB) func(ctx context.Context, k advisory.Key) (*advisory.Lease, error) {
			lk, err := advisory.NewLocker(db, advisory.LockerConfig{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = lk.Close(context.Background()) })
			return func(ctx context.Context, k advisory.Key) (*advisory.Lease, error) {
				return lk.Acquire(ctx, k, advisory.Try())
			}
		}},
	}
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			for _, driver := range pgtest.Drivers {
				db := s.Open(b, driver)
				// Room for 64 leases of their own, each on a connection.
				db.SetMaxOpenConns(80)
				db.SetMaxIdleConns(80)
				for _, g := range []int{1, 8, 64} {
					for _, v := range variants {
						b.Run(fmt.Sprintf("%s/goroutines=%d/%s", driver, g, v.name), func(b *testing.B) {
							acquire := v.open(b, db)
							benchLeasePairs(b, g, acquire)
						})
					}
				}
			}
		})
	}
}

// benchLeasePairs runs b.N acquire-and-release pairs on g goroutines.
func benchLeasePairs(b *testing.B, g int, acquire func(ctx context.Context, k advisory.Key) (*advisory.Lease, error)) {
	ctx := context.Background()
	pair := func() error {
		l, err := acquire(ctx, advisory.Int64Key(freshKeys.Add(1)))
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
	// Warm: the connections exist.
	var warm sync.WaitGroup
	for range g {
		warm.Go(func() {
			for range 3 {
				if err := pair(); err != nil {
					b.Error(err)
				}
			}
		})
	}
	warm.Wait()
	lat := make([][]time.Duration, g)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range g {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := pair(); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
