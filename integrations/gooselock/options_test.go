package gooselock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/gooselock"
)

// TestOptions checks that both constructors take the options in range and
// refuse the others with an error matching advisory.ErrBadOption.
func TestOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []gooselock.Option
		bad  bool
	}{
		{"None", nil, false},
		{"Heartbeat", []gooselock.Option{gooselock.Heartbeat(time.Second)}, false},
		{"HeartbeatMillisecond", []gooselock.Option{gooselock.Heartbeat(time.Millisecond)}, false},
		{"HeartbeatTooShort", []gooselock.Option{gooselock.Heartbeat(time.Microsecond)}, true},
		{"HeartbeatNegative", []gooselock.Option{gooselock.Heartbeat(-time.Second)}, true},
		{"Wait", []gooselock.Option{gooselock.Wait(time.Minute)}, false},
		{"WaitZero", []gooselock.Option{gooselock.Wait(0)}, false},
		{"WaitNegative", []gooselock.Option{gooselock.Wait(-time.Second)}, true},
		{"Nil", []gooselock.Option{nil}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, errS := gooselock.NewSessionLocker(gooselock.DefaultKey, c.opts...)
			_, errL := gooselock.NewLocker(gooselock.DefaultKey, c.opts...)
			for what, err := range map[string]error{"NewSessionLocker": errS, "NewLocker": errL} {
				switch {
				case c.bad && !errors.Is(err, advisory.ErrBadOption):
					t.Errorf("%s = %v; want an error matching advisory.ErrBadOption", what, err)
				case !c.bad && err != nil:
					t.Errorf("%s = %v; want nil", what, err)
				}
			}
		})
	}
}

// TestDefaultKey checks that DefaultKey is goose's own lock id as one
// bigint, the key goose's PostgreSQL lockers take.
func TestDefaultKey(t *testing.T) {
	t.Parallel()
	if v, ok := gooselock.DefaultKey.Int64(); !ok || v != 4097083626 {
		t.Fatalf("DefaultKey = %v; want the bigint 4097083626", gooselock.DefaultKey)
	}
}

// TestUnlockWithoutLock checks that an unlock of a lock never taken is an
// error naming the mistake, and takes nothing.
func TestUnlockWithoutLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := gooselock.NewSessionLocker(gooselock.DefaultKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SessionUnlock(ctx, nil); err == nil {
		t.Error("SessionUnlock without SessionLock = nil; want an error")
	}
	if err := s.SessionLock(ctx, nil); err == nil {
		t.Error("SessionLock(nil conn) = nil; want an error")
	}
	l, err := gooselock.NewLocker(gooselock.DefaultKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx, nil); err == nil {
		t.Error("Unlock without Lock = nil; want an error")
	}
}

// TestCancelOnLossCancel checks that the cancel function CancelOnLoss
// returns ends the context with context.Canceled as its cause, as a plain
// cancel does.
func TestCancelOnLossCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := gooselock.CancelOnLoss(context.Background())
	if ctx.Err() != nil {
		t.Fatalf("ctx.Err() = %v before cancel; want nil", ctx.Err())
	}
	cancel()
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("context.Cause = %v after cancel; want context.Canceled", context.Cause(ctx))
	}
}
