package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// jobs is the job table, in a schema of its own so that runs on one
// database never meet. Each job's execution is recorded in runs, so that
// the database can tell how often each job ran.
type jobs struct {
	pool   *pgxpool.Pool
	schema string // a quoted identifier
}

// createJobs creates a fresh schema with jobs 1 to n, none done.
func createJobs(ctx context.Context, pool *pgxpool.Pool, n int) (*jobs, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	// The name is lower-case hex only, so quoting it is enough.
	j := &jobs{pool: pool, schema: `"pgadvisory_pgxworkers_` + hex.EncodeToString(b[:]) + `"`}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+j.schema); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	for _, q := range []string{
		"CREATE TABLE " + j.t("jobs") + " (id int PRIMARY KEY, done_by int)",
		"CREATE TABLE " + j.t("runs") + " (job_id int NOT NULL REFERENCES " + j.t("jobs") + ", worker int NOT NULL)",
		"INSERT INTO " + j.t("jobs") + " (id) SELECT generate_series(1, " + fmt.Sprint(n) + ")",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			j.drop()
			return nil, fmt.Errorf("create jobs: %w", err)
		}
	}
	return j, nil
}

// t returns the qualified name of one of the schema's tables.
func (j *jobs) t(name string) string { return j.schema + "." + name }

// drop removes the schema, even after the run's context ended.
func (j *jobs) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = j.pool.Exec(ctx, "DROP SCHEMA "+j.schema+" CASCADE")
}

// pick returns a job that looks undone, at random, or pgx.ErrNoRows when
// every job is done. Several workers often pick the same job: the lock
// decides which of them runs it.
func (j *jobs) pick(ctx context.Context) (int32, error) {
	var id int32
	err := j.pool.QueryRow(ctx, "SELECT id FROM "+j.t("jobs")+" WHERE done_by IS NULL ORDER BY random() LIMIT 1").Scan(&id)
	return id, err
}

// done reports whether job id is done, as tx sees it.
func (j *jobs) done(ctx context.Context, tx pgx.Tx, id int32) (bool, error) {
	var done bool
	err := tx.QueryRow(ctx, "SELECT done_by IS NOT NULL FROM "+j.t("jobs")+" WHERE id = $1", id).Scan(&done)
	return done, err
}

// run runs job id in tx: it records the execution, does the job's work,
// and marks the job done by worker. Without the job's lock, two workers
// could both find the job undone and both run it.
func (j *jobs) run(ctx context.Context, tx pgx.Tx, id int32, worker int) error {
	if _, err := tx.Exec(ctx, "INSERT INTO "+j.t("runs")+" (job_id, worker) VALUES ($1, $2)", id, worker); err != nil {
		return err
	}
	time.Sleep(time.Millisecond) // the work
	_, err := tx.Exec(ctx, "UPDATE "+j.t("jobs")+" SET done_by = $2 WHERE id = $1", id, worker)
	return err
}

// ranOnce counts the jobs that ran exactly once.
func (j *jobs) ranOnce(ctx context.Context) (int, error) {
	var n int
	err := j.pool.QueryRow(ctx, "SELECT count(*) FROM "+j.t("jobs")+" j WHERE (SELECT count(*) FROM "+j.t("runs")+" r WHERE r.job_id = j.id) = 1").Scan(&n)
	return n, err
}
