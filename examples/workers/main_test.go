package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRun runs the program's core on every server and driver and checks
// that every job ran exactly once, by the database's count.
func TestRun(t *testing.T) {
	t.Parallel()
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		cfg := config{Jobs: 60, Workers: 6, Work: time.Millisecond}
		tg.DB.SetMaxOpenConns(cfg.Workers)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		var out strings.Builder
		rep, err := run(ctx, tg.DB, cfg, &out)
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		p := rep.Proof
		if !p.ok() {
			t.Fatalf("not exactly once: %+v\n%s", p, out.String())
		}
		if p.Jobs != cfg.Jobs || p.Runs != cfg.Jobs || rep.Total.Done != cfg.Jobs {
			t.Errorf("jobs %d, runs %d, done %d; want %d each", p.Jobs, p.Runs, rep.Total.Done, cfg.Jobs)
		}
		if len(rep.Workers) != cfg.Workers {
			t.Errorf("%d worker tallies, want %d", len(rep.Workers), cfg.Workers)
		}
		if !strings.Contains(out.String(), "exactly once: all 60 jobs ran once") {
			t.Errorf("output does not state the proof:\n%s", out.String())
		}
		t.Logf("skipped %d, stale %d", rep.Total.Skipped, rep.Total.Stale)
	})
}

// TestRunBadConfig checks that a run with nothing to do is refused before
// it touches the database.
func TestRunBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  config
	}{
		{"NoJobs", config{Jobs: 0, Workers: 1}},
		{"NoWorkers", config{Jobs: 1, Workers: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := run(context.Background(), nil, tt.cfg, &strings.Builder{}); err == nil {
				t.Fatal("run accepted a config with nothing to do")
			}
		})
	}
}

// TestProofDetectsFailure checks that the proof rejects the outcomes it
// exists to catch.
func TestProofDetectsFailure(t *testing.T) {
	t.Parallel()
	good := proof{Jobs: 3, Runs: 3, DoneTotal: 3}
	if !good.ok() {
		t.Fatalf("%+v should pass", good)
	}
	tests := []struct {
		name string
		edit func(*proof)
	}{
		{"JobTwice", func(p *proof) { p.Runs, p.NotOnce = 4, 1 }},
		{"JobMissed", func(p *proof) { p.Runs, p.Undone, p.NotOnce = 2, 1, 1 }},
		{"WrongWorker", func(p *proof) { p.Mismatch = 1 }},
		{"WorkersMiscount", func(p *proof) { p.DoneTotal = 4 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := good
			tt.edit(&p)
			if p.ok() {
				t.Errorf("%+v passed", p)
			}
		})
	}
}
