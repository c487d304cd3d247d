package pgtest

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
)

func TestSplitImage(t *testing.T) {
	tests := []struct{ image, repo, tag string }{
		{"postgres:17", "postgres", "17"},
		{"postgres", "postgres", "latest"},
		{"pgadvisory/postgres:15", "pgadvisory/postgres", "15"},
		{"localhost:5000/pg", "localhost:5000/pg", "latest"},
		{"localhost:5000/pg:16", "localhost:5000/pg", "16"},
	}
	for _, tt := range tests {
		repo, tag := splitImage(tt.image)
		if repo != tt.repo || tag != tt.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tt.image, repo, tag, tt.repo, tt.tag)
		}
	}
}

func TestList(t *testing.T) {
	got := list(" a, ,b,")
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("list = %q", got)
	}
	if got := list(""); got != nil {
		t.Errorf("list(\"\") = %q", got)
	}
}

func TestName(t *testing.T) {
	servers := []*Server{{Version: 15}, {Version: 17}, {Version: 17}}
	name(servers)
	var got []string
	for _, s := range servers {
		got = append(got, s.Name)
	}
	if want := []string{"pg15", "pg17", "pg17-2"}; !slices.Equal(got, want) {
		t.Errorf("names = %q, want %q", got, want)
	}
}

func TestTrackStopsOnce(t *testing.T) {
	n := 0
	stop := track(func() { n++ })
	stop()
	stop()
	if n != 1 {
		t.Errorf("stopped %d times, want 1", n)
	}
}

// TestShortStartsNothing checks that under go test -short, Servers and
// StartServer skip with a message that says why, before they look for a
// server: the shared servers were never started.
func TestShortStartsNothing(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks go test -short; run with -short")
	}
	for _, tt := range []struct {
		name string
		call func(tb testing.TB)
	}{
		{"Servers", func(tb testing.TB) { Servers(tb) }},
		{"StartServer", func(tb testing.TB) { StartServer(tb, "-c", "fsync=off") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &skipRecorder{TB: t}
			r.run(tt.call)
			if r.skip != shortSkip {
				t.Errorf("%s under -short: skip %q, want %q", tt.name, r.skip, shortSkip)
			}
		})
	}
	if shared.servers != nil || shared.err != nil {
		t.Errorf("Servers under -short looked for servers: %d servers, error %v", len(shared.servers), shared.err)
	}
}

// skipRecorder is a testing.TB that records a skip instead of ending the
// test; everything else goes to the real test.
type skipRecorder struct {
	testing.TB
	skip string
}

func (r *skipRecorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with r in a goroutine of its own, which Skipf ends.
func (r *skipRecorder) run(f func(tb testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}
