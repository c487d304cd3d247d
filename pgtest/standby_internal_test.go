package pgtest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatalf records its message and ends
// the goroutine, so that a test can see what a call refused.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestSharedPairRefusesChanges(t *testing.T) {
	p := &Pair{Name: "pg17", shared: true}
	tests := []struct {
		name string
		op   func(testing.TB)
	}{
		{"Cut", p.Cut},
		{"Kill", p.Kill},
		{"Promote", p.Promote},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fatalRecorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				tt.op(r)
			}()
			<-done
			if !strings.Contains(r.msg, tt.name+" of pg17: only a pair from StartStandbys") {
				t.Errorf("%s of a shared pair: fatal %q", tt.name, r.msg)
			}
		})
	}
}

func TestMultiHostDSN(t *testing.T) {
	p := &Pair{
		Primary: &Server{DSN: "postgres://postgres@127.0.0.1:5001/postgres?sslmode=disable"},
		Standby: &Server{DSN: "postgres://postgres@127.0.0.1:5002/postgres?sslmode=disable"},
	}
	want := "host=127.0.0.1,127.0.0.1 port=5001,5002 user=postgres dbname=postgres sslmode=disable connect_timeout=2 target_session_attrs=read-write"
	if got := p.MultiHostDSN("read-write"); got != want {
		t.Errorf("MultiHostDSN = %q, want %q", got, want)
	}
}
