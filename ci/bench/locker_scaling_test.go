package bench_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// scalingGoroutines is how many goroutines take and release a scaling
// run's leases.
const scalingGoroutines = 32

// scalingBeat is the Locker's default heartbeat interval, at which the
// heartbeat statements per second are given.
const scalingBeat = 5 * time.Second

// scalingLocks is the server setting of the scaling runs: room in the
// lock table for 100,000 leases of each driver at once, and more, with the
// harness's max_connections of 300 (300 × 512 = 153,600 nominal).
const scalingLocks = "max_locks_per_transaction=512"

// scalingKeys returns the numbers of leases a scaling run holds: 1,000,
// 10,000 and 100,000, or up to PGADVISORY_SCALING_MAX.
func scalingKeys(b *testing.B) []int {
	most := 100_000
	if s := os.Getenv("PGADVISORY_SCALING_MAX"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("PGADVISORY_SCALING_MAX=%q: want a positive number", s)
		}
		most = n
	}
	var ns []int
	for _, n := range []int{1_000, 3_000, 10_000, 30_000, 100_000} {
		if n <= most {
			ns = append(ns, n)
		}
	}
	return ns
}

// A scalingPoint is one scaling run's figures, for ci/bench/chart.
type scalingPoint struct {
	Group      string  `json:"group"`  // server/driver
	Config     string  `json:"config"` // a scalingConfig, or perconn=K
	Keys       int     `json:"keys"`
	AcquireUS  float64 `json:"acquire_us"` // per key
	ReleaseUS  float64 `json:"release_us"` // per key
	HeapB      float64 `json:"heap_b"`     // per lease
	RSSB       float64 `json:"rss_b"`      // per lease
	Backends   int     `json:"backends"`
	BeatsPerS  float64 `json:"beats_per_s"`
	HeartbeatS float64 `json:"heartbeat_s"`
}

var scalingResults = struct {
	sync.Mutex
	points []scalingPoint
}{}

// A scalingConfig is one way of configuring the Locker of a scaling run,
// for n leases.
type scalingConfig struct {
	name string
	cfg  func(n int) advisory.LockerConfig
}

// scalingConfigs are the curve's configurations: the Locker's default, and
// MaxConns raised to n/1,000, as LockerConfig's documentation says, for a
// connection per 1,000 leases (KeysPerConn's default).
var scalingConfigs = []scalingConfig{
	{"default", func(int) advisory.LockerConfig { return advisory.LockerConfig{} }},
	{"maxconns=n/1000", func(n int) advisory.LockerConfig { return advisory.LockerConfig{MaxConns: max(4, n/1000)} }},
}

// defaultScalingMost is the most leases a scaling run holds with the
// default configuration: 100,000 on its 4 connections, 25,000 on each,
// take some 17 ms a key by the end, which is what the curve up to 30,000
// already shows, at half an hour a run.
const defaultScalingMost = 30_000

// kneeKeys is how many leases the runs that find the knee hold, and
// kneePerConn how many of them each connection carries in each.
const kneeKeys = 30_000

var kneePerConn = []int{250, 500, 1000, 2000, 5000, 7500}

// BenchmarkLockerScaling takes n leases with one Locker, on 32
// goroutines, holds them through a heartbeat of every connection, and
// releases them one by one in the order they were taken, for n from
// 1,000 to 100,000 (PGADVISORY_SCALING_MAX lowers the top), on each
// server and driver, in each of scalingConfigs (the default up to
// defaultScalingMost), with the default heartbeat of 5 s. Besides the
// wall time of the whole run, it reports per key the acquire and the
// release time of all goroutines together (wall time over n), the Go heap
// and the process's RSS each lease adds (the RSS is the whole process's,
// which the runtime may give back: a negative figure shrank), how many
// backends hold the locks, and the heartbeat statements per second those
// backends cost the server at the default interval of 5 s (one per
// connection per interval). Run each point once:
//
//	go test -run '^$' -bench LockerScaling -benchtime=1x -timeout 2h .
//
// BenchmarkLockerKnee holds 30,000 leases with 250 to 7,500 of them on
// each connection, to show where the cost per key turns up.
//
// With PGADVISORY_SCALING_OUT set, the figures of both go to that file as
// JSON, which ci/bench/chart draws (-scaling) as docs/locker-scaling.png.
func BenchmarkLockerScaling(b *testing.B) {
	benchScaling(b, func(run func(name string, n int, cfg advisory.LockerConfig)) {
		for _, n := range scalingKeys(b) {
			for _, c := range scalingConfigs {
				if c.name == "default" && n > defaultScalingMost {
					continue
				}
				run(fmt.Sprintf("keys=%d/%s", n, c.name), n, c.cfg(n))
			}
		}
	})
}

// BenchmarkLockerKnee: see BenchmarkLockerScaling.
func BenchmarkLockerKnee(b *testing.B) {
	benchScaling(b, func(run func(name string, n int, cfg advisory.LockerConfig)) {
		for _, per := range kneePerConn {
			run(fmt.Sprintf("keys=%d/perconn=%d", kneeKeys, per), kneeKeys,
				advisory.LockerConfig{MaxConns: max(1, kneeKeys/per), KeysPerConn: per})
		}
	})
}

// benchScaling runs the scaling runs that each calls for, on a dedicated
// server per image whose lock table has room for them, with each driver.
func benchScaling(b *testing.B, each func(run func(name string, n int, cfg advisory.LockerConfig))) {
	servers := pgtest.StartServer(b, "-c", scalingLocks)
	if len(servers) == 0 {
		b.Skip("PGADVISORY_TEST_DSN names existing servers: the scaling runs need a dedicated one")
	}
	b.Cleanup(writeScaling(b))
	for _, s := range servers {
		for _, driver := range pgtest.Drivers {
			obs := s.Open(b, pgtest.DriverPQ)
			each(func(name string, n int, cfg advisory.LockerConfig) {
				b.Run(s.Name+"/"+driver+"/"+name, func(b *testing.B) {
					conns := max(cfg.MaxConns, 4)
					db := s.Open(b, driver)
					db.SetMaxOpenConns(conns + 8)
					db.SetMaxIdleConns(conns + 8)
					for range b.N {
						p := scalingRun(b, db, obs, n, cfg)
						p.Group, p.Config = s.Name+"/"+driver, name[strings.Index(name, "/")+1:]
						scalingResults.Lock()
						scalingResults.points = append(scalingResults.points, p)
						scalingResults.Unlock()
						b.ReportMetric(p.AcquireUS, "acquire-µs/key")
						b.ReportMetric(p.ReleaseUS, "release-µs/key")
						b.ReportMetric(p.HeapB, "heap-B/lease")
						b.ReportMetric(p.RSSB, "rss-B/lease")
						b.ReportMetric(float64(p.Backends), "backends")
						b.ReportMetric(p.BeatsPerS, "beats/s")
					}
				})
			})
		}
	}
}

// scalingRun takes n fresh keys with a Locker on db, holds them through
// a heartbeat of every connection, releases them one by one, and returns
// its figures.
func scalingRun(b *testing.B, db, obs *sql.DB, n int, cfg advisory.LockerConfig) scalingPoint {
	ctx := context.Background()
	lk, err := advisory.NewLocker(db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Close(ctx)
	base := rand.Int64N(1<<40) << 20
	heap0, rss0 := memNow()
	ls := make([]*advisory.Lease, n)
	acquire := onGoroutines(n, func(i int) error {
		l, err := lk.Acquire(ctx, advisory.Int64Key(base+int64(i)), advisory.Try())
		ls[i] = l
		return err
	})
	if acquire < 0 {
		b.Fatal("an acquisition failed")
	}
	heap1, rss1 := memNow()
	var backends, locks int
	if err := obs.QueryRowContext(ctx, `SELECT pg_catalog.count(DISTINCT pid), pg_catalog.count(*) FROM pg_catalog.pg_locks
		WHERE locktype = 'advisory' AND granted AND objid >= $1 AND objid < $2`,
		uint32(base), uint32(base)+uint32(n)).Scan(&backends, &locks); err != nil {
		b.Fatal(err)
	}
	if locks != n {
		lost := 0
		var cause error
		for _, l := range ls {
			if err := l.Err(); err != nil {
				lost, cause = lost+1, err
			}
		}
		b.Fatalf("pg_locks shows %d of the %d locks; %d leases lost, the last with %v", locks, n, lost, cause)
	}
	// The first heartbeat of each connection counts its locks.
	time.Sleep(scalingBeat + time.Second)
	for _, l := range ls {
		if err := l.Err(); err != nil {
			b.Fatalf("lease on %v lost while held: %v", l.Key(), err)
		}
	}
	release := onGoroutines(n, func(i int) error { return ls[i].Release(ctx) })
	if release < 0 {
		b.Fatal("a release failed")
	}
	return scalingPoint{
		Keys:       n,
		AcquireUS:  float64(acquire.Microseconds()) / float64(n),
		ReleaseUS:  float64(release.Microseconds()) / float64(n),
		HeapB:      float64(heap1-heap0) / float64(n),
		RSSB:       float64(rss1-rss0) / float64(n),
		Backends:   backends,
		BeatsPerS:  float64(backends) / scalingBeat.Seconds(),
		HeartbeatS: scalingBeat.Seconds(),
	}
}

// onGoroutines calls f(i) for i from 0 to n-1 on scalingGoroutines
// goroutines and returns how long that took, or -1 if a call failed.
func onGoroutines(n int, f func(i int) error) time.Duration {
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for range scalingGoroutines {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && !failed.Load(); i = next.Add(1) - 1 {
				if err := f(int(i)); err != nil {
					fmt.Fprintf(os.Stderr, "call %d of %d: %v\n", i, n, err)
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return -1
	}
	return time.Since(start)
}

// memNow returns the Go heap in use after a collection, and the process's
// resident set, in bytes.
func memNow() (heap, rss int64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, err := os.ReadFile("/proc/self/statm")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return int64(ms.HeapAlloc), rss
}

// writeScaling returns the cleanup that writes the scaling figures to
// PGADVISORY_SCALING_OUT, if set.
func writeScaling(b *testing.B) func() {
	return func() {
		out := os.Getenv("PGADVISORY_SCALING_OUT")
		if out == "" {
			return
		}
		scalingResults.Lock()
		defer scalingResults.Unlock()
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", " ")
		if err := enc.Encode(scalingResults.points); err != nil {
			b.Error(err)
			return
		}
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			b.Error(err)
		}
	}
}
