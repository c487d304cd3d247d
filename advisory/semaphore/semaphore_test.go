package semaphore

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

func TestSlots(t *testing.T) {
	s := New(nil, advisory.PairKey(7, math.MaxInt32), 3)
	want := []advisory.Key{advisory.PairKey(7, math.MaxInt32), advisory.PairKey(7, math.MinInt32), advisory.PairKey(7, math.MinInt32+1)}
	for i, w := range want {
		if got := s.Slot(i); got != w {
			t.Errorf("Slot(%d) = %v; want %v", i, got, w)
		}
	}
	if got := New(nil, advisory.Int64Key(10), 2).Slot(1); got != advisory.Int64Key(11) {
		t.Errorf("Slot(1) = %v", got)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	// A nil db, which New reports after the options: an option accepted
	// by mistake gives the nil db's error, which is not ErrBadOption.
	tests := []struct {
		name string
		s    *Semaphore
		want error // nil: any error
	}{
		{name: "NilDB", s: New(nil, advisory.Int64Key(1), 1)},
		{name: "ZeroSlots", s: New(nil, advisory.Int64Key(1), 0)},
		{name: "Overflow", s: New(nil, advisory.Int64Key(math.MaxInt64), 2)},
		{name: "ZeroHeartbeat", s: New(nil, advisory.Int64Key(1), 1, Heartbeat(0)), want: advisory.ErrBadOption},
		{name: "SubMillisecondHeartbeat", s: New(nil, advisory.Int64Key(1), 1, Heartbeat(time.Microsecond)), want: advisory.ErrBadOption},
		{name: "LastHeartbeatCounts", s: New(nil, advisory.Int64Key(1), 1, Heartbeat(time.Second), Heartbeat(-time.Second)), want: advisory.ErrBadOption},
		{name: "ZeroRecheck", s: New(nil, advisory.Int64Key(1), 1, Recheck(0)), want: advisory.ErrBadOption},
		{name: "NegativeRecheck", s: New(nil, advisory.Int64Key(1), 1, Recheck(-time.Second)), want: advisory.ErrBadOption},
		{name: "SubMillisecondRecheck", s: New(nil, advisory.Int64Key(1), 1, Recheck(time.Microsecond)), want: advisory.ErrBadOption},
		{name: "RecheckTooLong", s: New(nil, advisory.Int64Key(1), 1, Recheck((math.MaxInt32+1)*time.Millisecond)), want: advisory.ErrBadOption},
		{name: "LastRecheckCounts", s: New(nil, advisory.Int64Key(1), 1, Recheck(time.Second), Recheck(0)), want: advisory.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.s.TryAcquire(t.Context())
			switch {
			case err == nil || !strings.HasPrefix(err.Error(), "semaphore: "):
				t.Errorf("TryAcquire = %v; want an error starting semaphore: ", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("TryAcquire = %v; want an error matching %v", err, tt.want)
			}
			if _, err := tt.s.Acquire(t.Context()); err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("Acquire = %v; want an error matching %v", err, tt.want)
			}
		})
	}
	t.Run("GoodOptions", func(t *testing.T) {
		t.Parallel()
		s := New(nil, advisory.Int64Key(1), 1, Heartbeat(0), Heartbeat(time.Millisecond),
			Recheck(-time.Second), Recheck(time.Millisecond), Recheck(math.MaxInt32*time.Millisecond), Fencing(), nil)
		if _, err := s.TryAcquire(t.Context()); err == nil || errors.Is(err, advisory.ErrBadOption) {
			t.Errorf("TryAcquire with good options and a nil db = %v; want the nil db's error", err)
		}
	})
}
