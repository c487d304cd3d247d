package semaphore

import (
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
	tests := []struct {
		name string
		s    *Semaphore
	}{
		{"NilDB", New(nil, advisory.Int64Key(1), 1)},
		{"ZeroSlots", New(nil, advisory.Int64Key(1), 0)},
		{"Overflow", New(nil, advisory.Int64Key(math.MaxInt64), 2)},
		{"Heartbeat", New(nil, advisory.Int64Key(1), 1, Heartbeat(0))},
		{"Recheck", New(nil, advisory.Int64Key(1), 1, Recheck(0))},
		{"RecheckTooLong", New(nil, advisory.Int64Key(1), 1, Recheck((math.MaxInt32+1)*time.Millisecond))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.s.TryAcquire(t.Context()); err == nil || !strings.HasPrefix(err.Error(), "semaphore: ") {
				t.Errorf("TryAcquire = %v", err)
			}
			if _, err := tt.s.Acquire(t.Context()); err == nil {
				t.Error("Acquire accepted")
			}
		})
	}
}
