package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/idempotency"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestRunExactlyOnceIntegration delivers each of 100 operations 10 times,
// 1,000 deliveries in a random order from 16 goroutines at once, then
// replays every operation once more. Each operation's effect, a row in a
// table of effects written in fn's transaction, is applied exactly once
// by the database's count; exactly one delivery of each reports Ran, the
// others Done or InProgress, and every replay gets the stored value.
func TestRunExactlyOnceIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ops, dups, workers := 100*scale(t), 10, 16
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		db := tg.DB
		db.SetMaxOpenConns(workers)
		records := tableName(t, db, "idem_once")
		effects := tableName(t, db, "idem_effects")
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+effects+" (op text NOT NULL, delivery int NOT NULL)"); err != nil {
			t.Fatal(err)
		}

		deliveries := make([]int, 0, ops*dups)
		for op := range ops {
			for range dups {
				deliveries = append(deliveries, op)
			}
		}
		rand.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

		var next atomic.Int64
		var counts [4]atomic.Int64 // by Outcome
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(deliveries) {
						return
					}
					key := fmt.Sprintf("%s-op-%d", records, deliveries[i]) // apart from the other drivers' subtests
					res, err := idempotency.Run(ctx, db, key, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
						if _, err := tx.ExecContext(ctx, "INSERT INTO "+effects+" (op, delivery) VALUES ($1, $2)", key, i); err != nil {
							return nil, err
						}
						return []byte("result of " + key), nil
					}, idempotency.Table(records))
					if err != nil && !errors.Is(err, idempotency.ErrInProgress) {
						errs <- fmt.Errorf("delivery %d of %s: %w", i, key, err)
						return
					}
					if res.Outcome != idempotency.InProgress && string(res.Value) != "result of "+key {
						errs <- fmt.Errorf("delivery %d of %s: %v with value %q", i, key, res.Outcome, res.Value)
						return
					}
					counts[res.Outcome].Add(1)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d deliveries of %d operations on %d goroutines in %v: ran %d, done %d, in progress %d",
			len(deliveries), ops, workers, elapsed.Round(time.Millisecond),
			counts[idempotency.Ran].Load(), counts[idempotency.Done].Load(), counts[idempotency.InProgress].Load())
		if got := counts[idempotency.Ran].Load(); got != int64(ops) {
			t.Errorf("%d deliveries ran, want %d", got, ops)
		}

		// Every operation is replayed once more, after the commits.
		for op := range ops {
			key := fmt.Sprintf("%s-op-%d", records, op)
			res, err := idempotency.Run(ctx, db, key, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
				return nil, errors.New("ran again")
			}, idempotency.Table(records))
			if err != nil || res.Outcome != idempotency.Done || string(res.Value) != "result of "+key || res.At.IsZero() {
				t.Fatalf("replay of %s: %+v, %v; want Done with the stored value", key, res, err)
			}
		}

		var rows, distinct, twice, recorded int
		q := `SELECT (SELECT count(*) FROM ` + effects + `), (SELECT count(DISTINCT op) FROM ` + effects + `),
			(SELECT count(*) FROM (SELECT op FROM ` + effects + ` GROUP BY op HAVING count(*) > 1) d),
			(SELECT count(*) FROM ` + records + `)`
		if err := db.QueryRowContext(ctx, q).Scan(&rows, &distinct, &twice, &recorded); err != nil {
			t.Fatal(err)
		}
		if rows != ops || distinct != ops || twice != 0 || recorded != ops {
			t.Errorf("effects: %d rows for %d operations, %d applied more than once, %d records; want %d each and none twice",
				rows, distinct, twice, recorded, ops)
		}
	})
}

// TestRunOutcomesIntegration walks through each case Run reports.
func TestRunOutcomesIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db := tg.DB
		name := tableName(t, db, "idem_outcomes")
		table := idempotency.Table(name)
		// The lock depends on the key alone, and the drivers' subtests
		// run at once on one server: each names its operations apart.
		k := func(op string) string { return name + ":" + op }
		calls := 0
		fn := func(value string) idempotency.Func {
			return func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
				calls++
				return []byte(value), nil
			}
		}

		t.Run("MissingTableWithNoCreate", func(t *testing.T) {
			_, err := idempotency.Run(ctx, db, k("a"), fn("x"), table, idempotency.NoCreate())
			if err == nil || calls != 0 {
				t.Fatalf("Run on a missing table with NoCreate = %v after %d calls; want an error and no call", err, calls)
			}
		})

		t.Run("RanThenDone", func(t *testing.T) {
			res, err := idempotency.Run(ctx, db, k("a"), fn("first"), table) // creates the table
			if err != nil || res.Outcome != idempotency.Ran || string(res.Value) != "first" || res.At.IsZero() {
				t.Fatalf("first Run = %+v, %v; want Ran with its value", res, err)
			}
			res2, err := idempotency.Run(ctx, db, k("a"), fn("second"), table)
			if err != nil || res2.Outcome != idempotency.Done || string(res2.Value) != "first" || !res2.At.Equal(res.At) {
				t.Fatalf("second Run = %+v, %v; want Done with the first value and time", res2, err)
			}
			if calls != 1 {
				t.Errorf("fn called %d times, want 1", calls)
			}
		})

		t.Run("NilValue", func(t *testing.T) {
			nothing := func(ctx context.Context, tx *sql.Tx) ([]byte, error) { return nil, nil }
			for _, want := range []idempotency.Outcome{idempotency.Ran, idempotency.Done} {
				res, err := idempotency.Run(ctx, db, k("nil"), nothing, table)
				if err != nil || res.Outcome != want || res.Value != nil {
					t.Fatalf("Run = %+v, %v; want %v with a nil value", res, err, want)
				}
			}
		})

		t.Run("FailureRecordsNothing", func(t *testing.T) {
			boom := errors.New("boom")
			_, err := idempotency.Run(ctx, db, k("b"), func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
				if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
					return nil, err
				}
				return nil, boom
			}, table)
			if !errors.Is(err, boom) {
				t.Fatalf("Run = %v, want fn's error", err)
			}
			res, err := idempotency.Run(ctx, db, k("b"), fn("retried"), table)
			if err != nil || res.Outcome != idempotency.Ran || string(res.Value) != "retried" {
				t.Fatalf("retry = %+v, %v; want Ran", res, err)
			}
		})

		t.Run("InProgressAndWait", func(t *testing.T) {
			// Another transaction holds the operation's lock, as a run
			// in progress does.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := advisory.XactLock(ctx, tx, advisory.NameKey(idempotency.DefaultNamespace, k("c"))); err != nil {
				t.Fatal(err)
			}
			res, err := idempotency.Run(ctx, db, k("c"), fn("c"), table)
			if !errors.Is(err, idempotency.ErrInProgress) || !errors.Is(err, advisory.ErrNotAcquired) || res.Outcome != idempotency.InProgress {
				t.Fatalf("Run = %+v, %v; want InProgress", res, err)
			}
			res, err = idempotency.Run(ctx, db, k("c"), fn("c"), table, idempotency.Wait(50*time.Millisecond))
			if !errors.Is(err, idempotency.ErrInProgress) || !errors.Is(err, advisory.ErrLockTimeout) || res.Outcome != idempotency.InProgress {
				t.Fatalf("Run with a short Wait = %+v, %v; want InProgress", res, err)
			}
			// The holder records the operation and commits while a
			// waiter waits: the waiter gets Done.
			got := make(chan idempotency.Result, 1)
			go func() {
				res, err := idempotency.Run(ctx, db, k("c"), fn("waiter"), table, idempotency.Wait(time.Minute))
				if err != nil {
					t.Error(err)
				}
				got <- res
			}()
			pgtest.AwaitWaiting(t, db, advisory.NameKey(idempotency.DefaultNamespace, k("c")))
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+name+" (key, result) VALUES ($1, 'holder')", k("c")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if res := <-got; res.Outcome != idempotency.Done || string(res.Value) != "holder" {
				t.Fatalf("waiter got %+v; want Done with the holder's value", res)
			}
		})

		t.Run("CancelledMidRun", func(t *testing.T) {
			// The client goes away while fn works: nothing is
			// committed, and the next delivery runs. Until the server
			// has rolled the cancelled transaction back, which it may
			// do a moment after Run returned (pgx closes the
			// connection instead of rolling back), a delivery without
			// Wait may find the operation in progress, as Run's
			// documentation says; a delivery with Wait waits for the
			// rollback and runs.
			for _, tc := range []struct {
				name string
				wait bool
			}{
				{"RetryAtOnce", false},
				{"RetryWithWait", true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					op := k("d-" + tc.name)
					cctx, ccancel := context.WithCancel(ctx)
					_, err := idempotency.Run(cctx, db, op, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
						ccancel()
						return []byte("lost"), nil
					}, table)
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("Run = %v, want context.Canceled", err)
					}
					opts := []idempotency.RunOption{table}
					if tc.wait {
						opts = append(opts, idempotency.Wait(pgtest.PollTimeout))
					}
					res, err := idempotency.Run(ctx, db, op, fn("again"), opts...)
					if !tc.wait && errors.Is(err, idempotency.ErrInProgress) && res.Outcome == idempotency.InProgress {
						t.Logf("the delivery right after the cancel found the operation in progress")
						res, err = idempotency.Run(ctx, db, op, fn("again"), table, idempotency.Wait(pgtest.PollTimeout))
					}
					if err != nil || res.Outcome != idempotency.Ran || string(res.Value) != "again" {
						t.Fatalf("next delivery = %+v, %v; want Ran", res, err)
					}
				})
			}
		})

		t.Run("Purge", func(t *testing.T) {
			if n, err := idempotency.Purge(ctx, db, time.Hour, table); err != nil || n != 0 {
				t.Fatalf("Purge(1h) = %d, %v; want 0", n, err)
			}
			time.Sleep(10 * time.Millisecond)
			n, err := idempotency.Purge(ctx, db, time.Millisecond, table)
			if err != nil || n < 4 {
				t.Fatalf("Purge(1ms) = %d, %v; want every record", n, err)
			}
			res, err := idempotency.Run(ctx, db, k("a"), fn("after purge"), table)
			if err != nil || res.Outcome != idempotency.Ran {
				t.Fatalf("Run after Purge = %+v, %v; want Ran", res, err)
			}
		})
	})
}
