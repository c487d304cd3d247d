package pgtest_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// fatalTB records the first Fatalf and ends the goroutine, as testing.T's
// does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestAwait(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		after int   // calls before cond reports true
		err   error // or fails with
		want  string
	}{
		{name: "AtOnce", after: 0},
		{name: "AfterSomeCalls", after: 5},
		{name: "ErrorFails", after: 3, err: boom, want: "pgtest: waiting for the thing: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := &fatalTB{TB: t}
			calls := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				pgtest.Await(tb, "the thing", func() (bool, error) {
					calls++
					if calls <= tc.after {
						return false, nil
					}
					return true, tc.err
				})
			}()
			<-done
			if tb.msg != tc.want {
				t.Errorf("Await failed the test with %q; want %q", tb.msg, tc.want)
			}
			if calls != tc.after+1 {
				t.Errorf("cond called %d times, want %d", calls, tc.after+1)
			}
		})
	}
}
