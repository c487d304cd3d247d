package pgtest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
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

// TestShortStartsNothing checks that under go test -short, Servers,
// StartServer and PgBouncer skip with a message that says why, before they look for a
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
		{"PgBouncer", func(tb testing.TB) { (&Server{Name: "pg17"}).PgBouncer(tb, 2) }},
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

func TestPgBouncerConfig(t *testing.T) {
	conf := pgbouncerConfig("127.0.0.1", "", 6543, 3, "/tmp/x/userlist.txt")
	for _, want := range []string{
		"* = host=127.0.0.1 port=5432\n",
		"listen_addr = 127.0.0.1\n",
		"listen_port = 6543\n",
		"pool_mode = transaction\n",
		"auth_type = trust\n",
		"auth_file = /tmp/x/userlist.txt\n",
		"default_pool_size = 3\n",
		"max_client_conn = 500\n",
		"ignore_startup_parameters = extra_float_digits\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
}

func TestPoolerDSN(t *testing.T) {
	const dsn = "postgres://postgres@127.0.0.1:6432/postgres?sslmode=disable"
	for _, tt := range []struct{ driver, want string }{
		{DriverPQ, "binary_parameters=yes"},
		{DriverPGX, "default_query_exec_mode=exec"},
		{DriverPGXCancel, "default_query_exec_mode=exec"},
	} {
		got, err := PoolerDSN(tt.driver, dsn)
		if err != nil {
			t.Fatalf("%s: %v", tt.driver, err)
		}
		if !strings.Contains(got, tt.want) || !strings.Contains(got, "sslmode=disable") {
			t.Errorf("PoolerDSN(%s) = %s, want %s and sslmode=disable", tt.driver, got, tt.want)
		}
	}
	if _, err := PoolerDSN("mysql", dsn); err == nil {
		t.Error("PoolerDSN(mysql) succeeded")
	}
}

func TestFindPgBouncerFromEnv(t *testing.T) {
	t.Setenv(envPgBouncer, t.TempDir()) // a directory, not a binary
	if _, err := findPgBouncer(); err == nil || !strings.Contains(err.Error(), envPgBouncer) {
		t.Errorf("findPgBouncer with %s a directory: %v", envPgBouncer, err)
	}
}

// TestChildren checks the /proc walk that pausing a local cluster relies
// on: this process is among its parent's children.
func TestChildren(t *testing.T) {
	kids, err := children(os.Getppid())
	if errors.Is(err, errUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kids, os.Getpid()) {
		t.Errorf("children(%d) = %v, lacks this process %d", os.Getppid(), kids, os.Getpid())
	}
}
