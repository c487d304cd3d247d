package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/leader"
)

func TestRunBadInput(t *testing.T) {
	ctx := context.Background()
	fn := func(context.Context, *advisory.Lease) error { return nil }
	key := advisory.Int64Key(1)
	tests := []struct {
		name string
		run  func() error
	}{
		{"NilDB", func() error { return leader.Run(ctx, nil, key, fn) }},
		{"Heartbeat", func() error { return leader.Run(ctx, nil, key, fn, leader.Heartbeat(0)) }},
		{"Backoff", func() error { return leader.Run(ctx, nil, key, fn, leader.Backoff(time.Second, time.Millisecond)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
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
