package pgtest_test

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder is a testing.TB that records a fatal or skip message instead of
// ending the test; everything else goes to the real test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with r in a goroutine of its own, which Fatalf and Skipf end.
func (r *recorder) run(f func(tb testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}
