package pgtest

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// Main runs the tests of m and then stops every server the test binary
// started, whether the tests passed or not, and exits with m's code. Call it
// from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// An interrupt (SIGINT) or SIGTERM also stops the servers before the binary
// exits. A test binary that crashes, as on a panic or a -timeout, cannot stop
// them: local clusters die with it, and the next test binary removes the
// containers that a dead one left behind.
//
// Each of checks runs after the servers have stopped, when the tests
// passed; one that returns an error fails the binary, as a leak check
// does:
//
//	func TestMain(m *testing.M) {
//		ignore := goleak.IgnoreCurrent()
//		pgtest.Main(m, func() error { return goleak.Find(ignore) })
//	}
func Main(m *testing.M, checks ...func() error) {
	mainCalled.Store(true)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return // the tests are over
		}
		fmt.Fprintf(os.Stderr, "pgtest: %v: stopping servers\n", sig)
		stopAll()
		code := 1
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		os.Exit(code)
	}()
	code := m.Run()
	signal.Stop(sigs)
	close(sigs)
	stopAll()
	for _, check := range checks {
		if code != 0 {
			break
		}
		if err := check(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
