package scope

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// waitErr is a server error carrying a SQLSTATE, as the drivers' are.
type waitErr struct{ code string }

func (e *waitErr) Error() string    { return "server error (SQLSTATE " + e.code + ")" }
func (e *waitErr) SQLState() string { return e.code }

func TestParseMillis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"100", 100 * time.Millisecond},
		{"250ms", 250 * time.Millisecond},
		{"1s", time.Second},
		{"5min", 5 * time.Minute},
		{"2h", 2 * time.Hour},
		{"1d", 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseMillis(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("parseMillis(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
			}
		})
	}
	for name, in := range map[string]string{
		"Empty": "", "UnknownUnit": "1x", "Negative": "-1s", "NoNumber": "abc", "UnitOnly": "ms", "Space": "1 s",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := parseMillis(in)
			if err == nil {
				t.Fatalf("parseMillis(%q) = %v, nil; want an error", in, got)
			}
			if !strings.HasPrefix(err.Error(), "advisory: ") || !strings.Contains(err.Error(), `"`+in+`"`) {
				t.Errorf("parseMillis(%q) error %q should name the package and the setting", in, err)
			}
		})
	}
}

func TestFirstSlicer(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		o        Options
		now      time.Duration // since start
		wantMS   int64
		wantLast bool
	}{
		// A second, stretched past the default deadlock_timeout.
		{name: "Defaults", wantMS: 1100},
		{name: "WaitSlice", o: Options{Slice: 3 * time.Second, Sliced: true}, wantMS: 3000},
		{name: "WaitSliceShorterThanDeadlockTimeout", o: Options{Slice: 200 * time.Millisecond, Sliced: true}, wantMS: 1100},
		{name: "Timeout", o: Options{Bounded: true, Timeout: 200 * time.Millisecond}, wantMS: 200, wantLast: true},
		{name: "TimeoutLongerThanSlice", o: Options{Bounded: true, Timeout: 5 * time.Second}, wantMS: 1100},
		{name: "TimeoutRoundsUp", o: Options{Bounded: true, Timeout: 200 * time.Millisecond}, now: 500 * time.Microsecond,
			wantMS: 200, wantLast: true},
		{name: "TimeoutAlmostGone", o: Options{Bounded: true, Timeout: 200 * time.Millisecond}, now: 199900 * time.Microsecond,
			wantMS: 1, wantLast: true},
		{name: "TimeoutPassed", o: Options{Bounded: true, Timeout: 200 * time.Millisecond}, now: 200 * time.Millisecond,
			wantMS: 0, wantLast: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := firstSlicer(start, &tt.o)
			ms, last := p.next(start.Add(tt.now))
			if ms != tt.wantMS || last != tt.wantLast {
				t.Fatalf("next = %d, %v; want %d, %v", ms, last, tt.wantMS, tt.wantLast)
			}
			if tt.o.Bounded && (p.bound != "Wait" || !p.deadline.Equal(start.Add(tt.o.Timeout))) {
				t.Errorf("deadline %v by %q; want start+%v by Wait", p.deadline.Sub(start), p.bound, tt.o.Timeout)
			}
			if !tt.o.Bounded && !p.deadline.IsZero() {
				t.Errorf("deadline %v without a Timeout", p.deadline.Sub(start))
			}
		})
	}
}

func TestFirstSliceMillis(t *testing.T) {
	t.Parallel()
	if ms := FirstSliceMillis(&Options{}); ms != 1100 {
		t.Errorf("FirstSliceMillis(defaults) = %d; want 1100", ms)
	}
	if ms := FirstSliceMillis(&Options{Slice: 3 * time.Second, Sliced: true}); ms != 3000 {
		t.Errorf("FirstSliceMillis(WaitSlice(3s)) = %d; want 3000", ms)
	}
}

func TestSlicerWithSettings(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		o         Options
		s         waitSettings
		wantSlice time.Duration
		wantEnd   time.Duration // deadline since start; 0 for none
		wantBound string
	}{
		{name: "Defaults", s: waitSettings{deadlock: time.Second}, wantSlice: 1100 * time.Millisecond},
		{name: "LongDeadlockTimeout", s: waitSettings{deadlock: 5 * time.Second}, wantSlice: 5500 * time.Millisecond},
		{name: "ShortDeadlockTimeout", s: waitSettings{deadlock: 100 * time.Millisecond}, wantSlice: time.Second},
		{name: "NoDeadlockTimeout", s: waitSettings{}, wantSlice: time.Second},
		{name: "WaitSliceOverDeadlockTimeout", o: Options{Slice: 3 * time.Second, Sliced: true},
			s: waitSettings{deadlock: time.Second}, wantSlice: 3 * time.Second},
		{name: "StatementTimeout", s: waitSettings{statement: 500 * time.Millisecond, deadlock: time.Second},
			wantSlice: 450 * time.Millisecond, wantEnd: 500 * time.Millisecond, wantBound: "the session's statement_timeout"},
		{name: "TinyStatementTimeout", s: waitSettings{statement: time.Millisecond, deadlock: time.Second},
			wantSlice: time.Millisecond, wantEnd: time.Millisecond, wantBound: "the session's statement_timeout"},
		{name: "LockTimeout", s: waitSettings{lock: 2 * time.Second, deadlock: time.Second},
			wantSlice: 1100 * time.Millisecond, wantEnd: 2 * time.Second, wantBound: "the session's lock_timeout"},
		{name: "LockTimeoutBeforeStatementTimeout", s: waitSettings{lock: 2 * time.Second, statement: 3 * time.Second, deadlock: time.Second},
			wantSlice: 1100 * time.Millisecond, wantEnd: 2 * time.Second, wantBound: "the session's lock_timeout"},
		{name: "TimeoutFirst", o: Options{Bounded: true, Timeout: time.Second}, s: waitSettings{lock: 2 * time.Second, deadlock: time.Second},
			wantSlice: 1100 * time.Millisecond, wantEnd: time.Second, wantBound: "Wait"},
		{name: "LockTimeoutBeforeTimeout", o: Options{Bounded: true, Timeout: 5 * time.Second},
			s:         waitSettings{lock: 2 * time.Second, deadlock: time.Second},
			wantSlice: 1100 * time.Millisecond, wantEnd: 2 * time.Second, wantBound: "the session's lock_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := firstSlicer(start, &tt.o).withSettings(start, tt.s)
			if p.slice != tt.wantSlice {
				t.Errorf("slice = %v; want %v", p.slice, tt.wantSlice)
			}
			switch {
			case tt.wantEnd == 0 && !p.deadline.IsZero():
				t.Errorf("deadline start+%v by %q; want none", p.deadline.Sub(start), p.bound)
			case tt.wantEnd != 0 && (!p.deadline.Equal(start.Add(tt.wantEnd)) || p.bound != tt.wantBound):
				t.Errorf("deadline start+%v by %q; want start+%v by %q", p.deadline.Sub(start), p.bound, tt.wantEnd, tt.wantBound)
			}
		})
	}
}

func TestSlicerNext(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := firstSlicer(start, &Options{}).withSettings(start, waitSettings{lock: 2 * time.Second, deadlock: time.Second})
	tests := []struct {
		name     string
		now      time.Duration
		wantMS   int64
		wantLast bool
	}{
		{"AtStart", 0, 1100, false},
		{"MoreThanASliceLeft", 800 * time.Millisecond, 1100, false},
		{"ExactlyASliceLeft", 900 * time.Millisecond, 1100, true},
		{"LessThanASliceLeft", 1500 * time.Millisecond, 500, true},
		{"AtTheDeadline", 2 * time.Second, 0, true},
		{"AfterTheDeadline", 3 * time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if ms, last := p.next(start.Add(tt.now)); ms != tt.wantMS || last != tt.wantLast {
				t.Fatalf("next(start+%v) = %d, %v; want %d, %v", tt.now, ms, last, tt.wantMS, tt.wantLast)
			}
		})
	}
}

// fakeWait records what waitInSlices asked of a session whose slices
// answer, in turn, with errs (nil takes the keys), and whose settings are
// s, or err.
type fakeWait struct {
	errs    []error
	s       waitSettings
	err     error
	calls   []string // "slice" and "settings", in order
	ms      []int64  // each slice's length
	onSlice func()   // runs in each slice, when set
}

func (f *fakeWait) readSettings(context.Context) (waitSettings, error) {
	f.calls = append(f.calls, "settings")
	return f.s, f.err
}

func (f *fakeWait) slice(_ context.Context, n int, ms int64, _ waitSettings) error {
	if n != len(f.ms) {
		panic("slices out of order")
	}
	f.calls = append(f.calls, "slice")
	f.ms = append(f.ms, ms)
	if f.onSlice != nil {
		f.onSlice()
	}
	if len(f.errs) == 0 {
		panic("a slice more than the test expects")
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func TestWaitInSlices(t *testing.T) {
	t.Parallel()
	ranOut := &waitErr{"55P03"}
	deadlock := &waitErr{"40P01"}
	defaults := waitSettings{deadlock: time.Second}
	tests := []struct {
		name      string
		o         Options
		first     bool          // settingsFirst: a wait for one key, which reads the settings before its first slice
		ago       time.Duration // the wait started this long before the test calls it
		w         fakeWait
		cancel    bool // ctx is cancelled before the first slice ends
		wantCalls []string
		wantMS    []int64 // nil: not checked
		wantErr   []error // nil: the wait takes the keys
		wantDoubt bool
		wantMsg   string
	}{
		{name: "FirstSliceTakes", w: fakeWait{errs: []error{nil}},
			wantCalls: []string{"slice"}, wantMS: []int64{1100}},
		{name: "RunsOutThenTakes", w: fakeWait{errs: []error{ranOut, nil}, s: defaults},
			wantCalls: []string{"slice", "settings", "slice"}, wantMS: []int64{1100, 1100}},
		{name: "SettingsReadOnce", w: fakeWait{errs: []error{ranOut, ranOut, ranOut, nil}, s: waitSettings{deadlock: 2 * time.Second}},
			wantCalls: []string{"slice", "settings", "slice", "slice", "slice"}, wantMS: []int64{1100, 2200, 2200, 2200}},
		{name: "RunsOutOnTheLastSlice", o: Options{Bounded: true, Timeout: 150 * time.Millisecond}, w: fakeWait{errs: []error{ranOut}},
			wantCalls: []string{"slice"}, wantErr: []error{ErrLockTimeout, ranOut},
			wantMsg: "advisory: lock 42: lock wait timed out: server error (SQLSTATE 55P03)"},
		{name: "SessionLockTimeoutPassed", ago: 10 * time.Second, w: fakeWait{errs: []error{ranOut}, s: waitSettings{lock: 2 * time.Second}},
			wantCalls: []string{"slice", "settings"}, wantMS: []int64{1100}, wantErr: []error{ErrLockTimeout},
			wantMsg: "advisory: lock 42: lock wait timed out: the session's lock_timeout ran out: server error (SQLSTATE 55P03)"},
		{name: "Deadlock", w: fakeWait{errs: []error{deadlock}},
			wantCalls: []string{"slice"}, wantErr: []error{ErrDeadlock, deadlock}, wantDoubt: true},
		{name: "DeadlockAfterRunningOut", w: fakeWait{errs: []error{ranOut, deadlock}, s: defaults},
			wantCalls: []string{"slice", "settings", "slice"}, wantErr: []error{ErrDeadlock, deadlock}, wantDoubt: true},
		// A slice that refused took nothing (see xacttake.go): the wait
		// ends with the refusal, the session not in doubt.
		{name: "Refused", w: fakeWait{errs: []error{ranOut, refusedError{FailKind("lock", "42", ErrStandby, nil)}}, s: defaults},
			wantCalls: []string{"slice", "settings", "slice"}, wantErr: []error{ErrStandby},
			wantMsg: "advisory: lock 42: the server is a hot standby, where advisory locks coordinate nothing with the primary"},
		{name: "Cancelled", w: fakeWait{errs: []error{context.Canceled}}, cancel: true,
			wantCalls: []string{"slice"}, wantErr: []error{context.Canceled}, wantDoubt: true},
		// A slice that ran out as ctx ended may have had a cancel land
		// on it instead: the session is in doubt.
		{name: "RanOutAsCancelled", w: fakeWait{errs: []error{ranOut}}, cancel: true,
			wantCalls: []string{"slice"}, wantErr: []error{ranOut}, wantDoubt: true},
		{name: "SettingsFail", w: fakeWait{errs: []error{ranOut}, err: errors.New("connection reset")},
			wantCalls: []string{"slice", "settings"}, wantDoubt: true,
			wantMsg: "advisory: lock 42: connection reset"},
		// A wait for one key reads the settings once, before its first
		// slice, which they already shape.
		{name: "SettingsFirstTakes", first: true, w: fakeWait{errs: []error{nil}, s: defaults},
			wantCalls: []string{"settings", "slice"}, wantMS: []int64{1100}},
		{name: "SettingsFirstReadOnce", first: true, w: fakeWait{errs: []error{ranOut, ranOut, nil}, s: waitSettings{deadlock: 2 * time.Second}},
			wantCalls: []string{"settings", "slice", "slice", "slice"}, wantMS: []int64{2200, 2200, 2200}},
		{name: "SettingsFirstBoundTheFirstSlice", first: true, w: fakeWait{errs: []error{ranOut}, s: waitSettings{lock: 500 * time.Millisecond, deadlock: time.Second}},
			wantCalls: []string{"settings", "slice"}, wantErr: []error{ErrLockTimeout, ranOut}},
		{name: "SettingsFirstLockTimeoutPassed", first: true, ago: 10 * time.Second, w: fakeWait{s: waitSettings{lock: 2 * time.Second}},
			wantCalls: []string{"settings"}, wantErr: []error{ErrLockTimeout},
			wantMsg: "advisory: lock 42: lock wait timed out: the session's lock_timeout ran out"},
		{name: "SettingsFirstDeadlock", first: true, w: fakeWait{errs: []error{ranOut, deadlock}, s: defaults},
			wantCalls: []string{"settings", "slice", "slice"}, wantErr: []error{ErrDeadlock, deadlock}, wantDoubt: true},
		{name: "SettingsFirstFail", first: true, w: fakeWait{err: errors.New("connection reset")},
			wantCalls: []string{"settings"}, wantDoubt: true,
			wantMsg: "advisory: lock 42: connection reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := tt.w
			if tt.cancel {
				w.onSlice = cancel
			}
			out := waitInSlices(ctx, time.Now().Add(-tt.ago), &tt.o, "lock", "42", tt.first, w.readSettings, w.slice)
			if !slices.Equal(w.calls, tt.wantCalls) {
				t.Errorf("calls %v; want %v", w.calls, tt.wantCalls)
			}
			if tt.wantMS != nil && !slices.Equal(w.ms, tt.wantMS) {
				t.Errorf("slices of %v ms; want %v", w.ms, tt.wantMS)
			}
			if tt.o.Bounded && (len(w.ms) == 0 || w.ms[0] > tt.o.TimeoutMillis() || w.ms[0] < tt.o.TimeoutMillis()-50) {
				t.Errorf("slices of %v ms; want the first just under the Timeout, %d", w.ms, tt.o.TimeoutMillis())
			}
			if out.doubt != tt.wantDoubt {
				t.Errorf("doubt = %v; want %v", out.doubt, tt.wantDoubt)
			}
			wantFail := tt.wantErr != nil || tt.wantMsg != ""
			if (out.err != nil) != wantFail {
				t.Fatalf("err = %v; want an error: %v", out.err, wantFail)
			}
			for _, want := range tt.wantErr {
				if !errors.Is(out.err, want) {
					t.Errorf("err %q does not match %v", out.err, want)
				}
			}
			if tt.wantMsg != "" && out.err.Error() != tt.wantMsg {
				t.Errorf("message\n got %q\nwant %q", out.err, tt.wantMsg)
			}
		})
	}
}
