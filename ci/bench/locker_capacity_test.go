package bench_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// BenchmarkLockerCapacity fills the lock table of a server with one
// Locker's leases, on a connection per 1,000, until an acquisition fails
// with advisory.ErrLockTableFull, and reports how many it held (leases)
// beside the nominal size of the table, max_locks_per_transaction ×
// (max_connections + max_prepared_transactions) (nominal), and the
// server's shared memory (shm-MB). It runs on a server with PostgreSQL's
// default settings (max_connections=100, max_locks_per_transaction=64,
// max_prepared_transactions=0), and with max_locks_per_transaction=1024,
// the setting for 100,000 leases. The setting for 1,000,000,
// max_locks_per_transaction=10240, is started and its shared memory
// reported, without filling it:
//
//	go test -run '^$' -bench LockerCapacity -benchtime=1x .
func BenchmarkLockerCapacity(b *testing.B) {
	for _, c := range []struct {
		name  string
		locks int
		fill  bool
	}{
		{"default", 64, true},
		{"locks=1024", 1024, true},
		{"locks=10240", 10240, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			servers := pgtest.StartServer(b, "-c", "max_connections=100",
				"-c", fmt.Sprintf("max_locks_per_transaction=%d", c.locks))
			if len(servers) == 0 {
				b.Skip("PGADVISORY_TEST_DSN names existing servers: the capacity runs need dedicated ones")
			}
			for _, s := range servers {
				b.Run(s.Name, func(b *testing.B) {
					for range b.N {
						capacityRun(b, s, c.fill)
					}
				})
			}
		})
	}
}

// capacityRun fills s's lock table, when fill says so, and reports its
// figures.
func capacityRun(b *testing.B, s *pgtest.Server, fill bool) {
	ctx := context.Background()
	obs := s.Open(b, pgtest.DriverPQ)
	var nominal, shm int64
	if err := obs.QueryRowContext(ctx, `SELECT pg_catalog.current_setting('max_locks_per_transaction')::pg_catalog.int8 *
		(pg_catalog.current_setting('max_connections')::pg_catalog.int8 + pg_catalog.current_setting('max_prepared_transactions')::pg_catalog.int8),
		pg_catalog.pg_size_bytes(pg_catalog.current_setting('shared_memory_size'))`).Scan(&nominal, &shm); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(nominal), "nominal")
	b.ReportMetric(float64(shm)/(1<<20), "shm-MB")
	if !fill {
		return
	}
	// A connection per 1,000 of the nominal size, within max_connections.
	conns := min(80, max(4, int(nominal)/1000))
	db := s.Open(b, pgtest.DriverPQ)
	db.SetMaxOpenConns(conns + 4)
	db.SetMaxIdleConns(conns + 4)
	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: conns})
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Close(ctx)
	base := rand.Int64N(1<<40) << 24
	var held, full atomic.Int64
	var ls []*advisory.Lease
	var next atomic.Int64
	res := make(chan *advisory.Lease, 1024)
	done := make(chan struct{})
	go func() {
		for l := range res {
			ls = append(ls, l)
		}
		close(done)
	}()
	if onGoroutines(int(nominal)*4, func(int) error {
		if full.Load() > 0 {
			return nil
		}
		l, err := lk.Acquire(ctx, advisory.Int64Key(base+next.Add(1)), advisory.Try())
		switch {
		case errors.Is(err, advisory.ErrLockTableFull):
			full.Add(1)
			return nil
		case errors.Is(err, advisory.ErrNotAcquired):
			// A connection lost under the try (a loaded machine answers
			// late) leaves its session holding the key for a moment.
			return nil
		case err != nil:
			return err
		}
		held.Add(1)
		res <- l
		return nil
	}) < 0 {
		b.Fatal("an acquisition failed otherwise than with ErrLockTableFull")
	}
	close(res)
	<-done
	if full.Load() == 0 {
		b.Fatalf("%d leases held and the lock table not full", held.Load())
	}
	b.ReportMetric(float64(held.Load()), "leases")
	onGoroutines(len(ls), func(i int) error { return ls[i].Release(ctx) })
}
