package leader_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/leader"
)

func TestRunBadInput(t *testing.T) {
	t.Parallel()
	// A cancelled ctx and a database that is never used: Run checks its
	// arguments first, and with good ones returns ctx's error at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	db := new(sql.DB)
	fn := func(context.Context, *advisory.Lease) error { return nil }
	key := advisory.Int64Key(1)
	tests := []struct {
		name string
		run  func() error
		want error // nil: any error but ctx's
	}{
		{name: "NilDB", run: func() error { return leader.Run(ctx, nil, key, fn) }},
		{name: "NilFunc", run: func() error { return leader.Run(ctx, db, key, nil) }},
		{name: "ZeroHeartbeat", run: func() error { return leader.Run(ctx, db, key, fn, leader.Heartbeat(0)) }, want: advisory.ErrBadOption},
		{name: "SubMillisecondHeartbeat", run: func() error { return leader.Run(ctx, db, key, fn, leader.Heartbeat(time.Microsecond)) }, want: advisory.ErrBadOption},
		{name: "LastHeartbeatCounts", run: func() error {
			return leader.Run(ctx, db, key, fn, leader.Heartbeat(time.Second), leader.Heartbeat(-time.Second))
		}, want: advisory.ErrBadOption},
		{name: "ZeroMinBackoff", run: func() error { return leader.Run(ctx, db, key, fn, leader.Backoff(0, time.Second)) }, want: advisory.ErrBadOption},
		{name: "NegativeMinBackoff", run: func() error { return leader.Run(ctx, db, key, fn, leader.Backoff(-time.Second, time.Second)) }, want: advisory.ErrBadOption},
		{name: "MaxBelowMinBackoff", run: func() error { return leader.Run(ctx, db, key, fn, leader.Backoff(time.Second, time.Millisecond)) }, want: advisory.ErrBadOption},
		{name: "LastBackoffCounts", run: func() error {
			return leader.Run(ctx, db, key, fn, leader.Backoff(time.Millisecond, time.Second), leader.Backoff(time.Second, 0))
		}, want: advisory.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.run()
			switch {
			case err == nil || errors.Is(err, context.Canceled):
				t.Fatalf("Run = %v; want an error for the bad input", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Run = %v; want an error matching %v", err, tt.want)
			}
		})
	}
	t.Run("GoodOptions", func(t *testing.T) {
		t.Parallel()
		err := leader.Run(ctx, db, key, fn, leader.Heartbeat(-time.Second), leader.Heartbeat(time.Millisecond),
			leader.Backoff(time.Second, time.Second), leader.Fencing(), nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run with good options and a cancelled ctx = %v; want context.Canceled", err)
		}
	})
	if _, _, err := leader.Current(ctx, nil, key); err == nil {
		t.Fatal("Current accepted a nil db")
	}
}

func TestInfo(t *testing.T) {
	i := leader.Info{PID: 42, ApplicationName: "scheduler"}
	if got := i.String(); got != "pid 42 (scheduler)" {
		t.Errorf("String = %q", got)
	}
	if i.Since() != 0 {
		t.Errorf("Since with no BackendStart = %v", i.Since())
	}
}
