package advisory

import (
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// TestWaitOptions checks the one meaning of a wait's bound: Try is
// Wait(0), a positive Wait bounds the wait, none waits without bound, and
// of several Try and Wait options the last one counts.
func TestWaitOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    []LockOption
		try     bool
		bounded time.Duration // 0: no bound
	}{
		{name: "None"},
		{name: "Try", opts: []LockOption{Try()}, try: true},
		{name: "WaitZeroIsTry", opts: []LockOption{Wait(0)}, try: true},
		{name: "Wait", opts: []LockOption{Wait(time.Second)}, bounded: time.Second},
		{name: "WaitThenTry", opts: []LockOption{Wait(time.Second), Try()}, try: true},
		{name: "TryThenWait", opts: []LockOption{Try(), Wait(time.Second)}, bounded: time.Second},
		{name: "WaitThenWaitZero", opts: []LockOption{Wait(time.Second), Wait(0)}, try: true},
		{name: "NilSkipped", opts: []LockOption{nil, Wait(time.Second), nil}, bounded: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var bound time.Duration
			if o.Bounded {
				bound = o.Timeout
			}
			if o.Try != tt.try || bound != tt.bounded {
				t.Errorf("Try %v, bound %v; want %v, %v", o.Try, bound, tt.try, tt.bounded)
			}
		})
	}
}

// TestBadOptionValues checks that values out of range are errors
// matching ErrBadOption, whichever kind of call they go to.
func TestBadOptionValues(t *testing.T) {
	t.Parallel()
	tests := map[string]func() error{
		"WaitNegative":      func() error { _, err := parse([]LockOption{Wait(-time.Nanosecond)}); return err },
		"WaitTooLong":       func() error { _, err := parse([]XactOption{Wait(1000 * time.Hour)}); return err },
		"WaitSliceTooShort": func() error { _, err := parse([]SessionOption{WaitSlice(time.Microsecond)}); return err },
		"HeartbeatTooShort": func() error { _, err := parse([]LeaseOption{Heartbeat(time.Microsecond)}); return err },
		"HeartbeatZero":     func() error { _, err := parse([]SessionOption{Heartbeat(0)}); return err },
	}
	for name, call := range tests {
		if err := call(); !errors.Is(err, ErrBadOption) {
			t.Errorf("%s: %v, want ErrBadOption", name, err)
		}
	}
}

// TestOptionsReachTheirSettings checks that each option sets what its doc
// says, through the kinds of call it may go to.
func TestOptionsReachTheirSettings(t *testing.T) {
	t.Parallel()
	o, err := parse([]LeaseOption{Shared(), Heartbeat(time.Minute), Fencing(), WaitSlice(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Shared || !o.Watched || o.Heartbeat != time.Minute || !o.Fencing || o.SliceLength() != time.Second {
		t.Errorf("settings %+v", o)
	}
	x, err := parse([]XactOption{TxOptions(nil), Shared()})
	if err != nil || !x.Shared {
		t.Errorf("XactOption settings %+v, %v", x, err)
	}
	var via scope.Options
	if !scope.ApplyOption(Shared(), &via) || !via.Shared {
		t.Error("scope.ApplyOption does not apply advisory's options")
	}
	if scope.ApplyOption(42, &via) {
		t.Error("scope.ApplyOption accepted a value that is no option")
	}
}
