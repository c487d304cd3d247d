package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of pgadvisory serve: the command runs as a process of
// its own against a database of the test's own, with held, shared and
// awaited locks in a blocking chain, and its page is loaded in a real
// headless Chromium.

// envChromium names the Chromium binary for TestServeChromium; without it
// the test looks for chromium and chromium-browser on PATH.
const envChromium = "PGADVISORY_TEST_CHROMIUM"

// envArtifacts names a directory for the page's screenshot; without it
// the screenshot goes to a temporary directory.
const envArtifacts = "PGADVISORY_TEST_ARTIFACTS"

// underCI reports whether CI is set, as pgtest decides it: CI=true (any
// value but "", 0, false and no) makes a missing tool a failure, not a skip.
func underCI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false", "no":
		return false
	}
	return true
}

// chromium returns the path of a headless-capable Chromium, or skips t
// (fails it under CI) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", envChromium, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no chromium or chromium-browser on PATH, and " + envChromium + " is not set: install Debian's package chromium (ci/test.sh does)"
	if underCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// runChromium runs Chromium headless with args and the URL, and returns
// its stdout.
func runChromium(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstderr: %s", bin, args, err, stderr.String())
	}
	return stdout.String()
}

// serving is a running pgadvisory serve.
type serving struct {
	*proc
	url string // http://host:port
}

// listening matches the line serve logs once it listens.
var listening = regexp.MustCompile(`listening on (http://\S+)/ `)

// startServe starts pgadvisory serve on a free port of the loopback
// interface, with env, and waits until it listens.
func startServe(t *testing.T, env []string, args ...string) *serving {
	t.Helper()
	p := start(t, env, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	s := &serving{proc: p}
	err := pgtest.Poll(10*time.Millisecond, func() (bool, error) {
		if m := listening.FindStringSubmatch(p.stderr.String()); m != nil {
			s.url = m[1]
			return true, nil
		}
		if p.cmd.ProcessState != nil {
			return false, errors.New("pgadvisory serve exited")
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for pgadvisory serve to listen: %v\nstderr: %s", err, p.stderr)
	}
	return s
}

// fetch GETs path from s and returns the status and body.
func (s *serving) fetch(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := http.Get(s.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode, string(body)
}

// stop sends s SIGTERM and checks that it shuts down cleanly.
func (s *serving) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t); code != 0 || !strings.Contains(s.stderr.String(), "stopped") {
		t.Errorf("after SIGTERM: exit %d, want 0 after \"stopped\"\nstderr: %s", code, s.stderr)
	}
}

// chainFixture is the lock state TestServeChromium serves.
type chainFixture struct {
	holder, sharer1, sharer2, middle, tail, sharedWaiter int // backend PIDs
	night, morning, daily                                advisory.Key
}

// setUpChain syncs namespaces billing (4242) and reports (4343) to the
// dictionary table of db's database, and takes: holder holds billing
// night; sharer1 and sharer2 share reports daily; middle holds billing
// morning and waits for night; tail waits for morning; sharedWaiter waits,
// shared, for night. That is the chain holder -> middle -> tail, and
// holder -> sharedWaiter; one of middle and sharedWaiter queues behind
// the other.
func setUpChain(t *testing.T, db *sql.DB) chainFixture {
	t.Helper()
	ctx := testContext(t)
	var reg keyspace.Registry
	billing := reg.MustRegister(advisory.Namespace{ID: 4242, Name: "billing", Owner: "team-payments", Doc: "invoice runs"})
	reports := reg.MustRegister(advisory.Namespace{ID: 4343, Name: "reports", Owner: "team-data"})
	if err := reg.Sync(ctx, db, keyspace.RegisteredBy("cmd/pgadvisory tests")); err != nil {
		t.Fatal(err)
	}
	f := chainFixture{night: billing.NameKey("nightly"), morning: billing.NameKey("morning"), daily: reports.NameKey("daily")}
	var holder, sharer1, sharer2, middle, tail, sharedWaiter *sql.Conn
	holder, f.holder = session(t, db, "serve-holder")
	sharer1, f.sharer1 = session(t, db, "serve-sharer-1")
	sharer2, f.sharer2 = session(t, db, "serve-sharer-2")
	middle, f.middle = session(t, db, "serve-middle")
	tail, f.tail = session(t, db, "serve-tail")
	sharedWaiter, f.sharedWaiter = session(t, db, "serve-shared-waiter")
	for _, err := range []error{
		advisory.Lock(ctx, holder, f.night),
		advisory.LockShared(ctx, sharer1, f.daily),
		advisory.LockShared(ctx, sharer2, f.daily),
		advisory.Lock(ctx, middle, f.morning),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	serveWait(t, middle, f.night, false)
	pgtest.AwaitWaiting(t, db, f.night)
	serveWait(t, tail, f.morning, false)
	pgtest.AwaitWaiting(t, db, f.morning)
	serveWait(t, sharedWaiter, f.night, true)
	return f
}

// TestServeChromium serves the chain of setUpChain and loads the page in
// headless Chromium: the rendered DOM must show every holder and waiter
// with its namespace's name, and the wait graph's arrows for the chain. A
// screenshot of the page is kept. /metrics, read over HTTP, reports the
// same locks, and SIGTERM stops the server cleanly.
func TestServeChromium(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		bin := chromium(t)
		tg := pgtest.NewDatabase(t, pgtest.Target{Server: s, Driver: pgtest.DriverPGX, DB: s.Open(t, pgtest.DriverPGX)}, pgtest.UniqueName("serve-"))
		f := setUpChain(t, tg.DB)
		srv := startServe(t, cliEnv("DATABASE_URL="+tg.Server.DSN), "--refresh", "0")

		// /metrics: all three waits, seen by the collector.
		var metrics string
		pgtest.Await(t, "/metrics to show three blocked sessions", func() (bool, error) {
			var code int
			code, metrics = srv.fetch(t, "/metrics")
			return code == 200 && strings.Contains(metrics, "\npgadvisory_blocked_sessions 3\n"), nil
		})
		for _, want := range []string{
			"\npgadvisory_up 1\n",
			`pgadvisory_locks{mode="exclusive",namespace="billing",state="held"} 2`,
			`pgadvisory_locks{mode="exclusive",namespace="billing",state="waiting"} 2`,
			`pgadvisory_locks{mode="shared",namespace="billing",state="waiting"} 1`,
			`pgadvisory_locks{mode="shared",namespace="reports",state="held"} 2`,
			"\npgadvisory_idle_holding_sessions 3\n",
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s\n%s", want, metrics)
			}
		}

		dom := runChromium(t, bin, srv.url+"/?refresh=0", "--dump-dom")
		row := func(pid int, k advisory.Key, mode, state, ns, app string) string {
			return fmt.Sprintf(`<tr class="lock %[4]s" id="lock-%[1]d-%[2]s-%[3]s" data-pid="%[1]d" data-key="%[2]s" data-state="%[4]s"><td><code>%[2]s</code></td><td>%[5]s</td><td>%[3]s</td><td>%[4]s</td><td class="num">%[1]d</td><td>%[6]s</td>`,
				pid, k, mode, state, ns, app)
		}
		for _, want := range []string{
			row(f.holder, f.night, "exclusive", "held", "billing", "serve-holder"),
			row(f.sharer1, f.daily, "shared", "held", "reports", "serve-sharer-1"),
			row(f.sharer2, f.daily, "shared", "held", "reports", "serve-sharer-2"),
			row(f.middle, f.morning, "exclusive", "held", "billing", "serve-middle"),
			row(f.middle, f.night, "exclusive", "waiting", "billing", "serve-middle"),
			row(f.tail, f.morning, "exclusive", "waiting", "billing", "serve-tail"),
			row(f.sharedWaiter, f.night, "shared", "waiting", "billing", "serve-shared-waiter"),
			`<tr id="namespace-4242"><td class="num">4242</td><td>billing</td><td>team-payments</td><td>invoice runs</td><td class="num">2</td><td class="num">3</td></tr>`,
			`<tr id="namespace-4343"><td class="num">4343</td><td>reports</td><td>team-data</td><td></td><td class="num">2</td><td class="num">0</td></tr>`,
			`<span id="held">4</span> held, <span id="waiting">3</span> awaited`,
			`id="wait-graph"`,
			fmt.Sprintf(`id="edge-%d-%d"`, f.holder, f.middle),
			fmt.Sprintf(`id="edge-%d-%d"`, f.middle, f.tail),
			fmt.Sprintf(`id="edge-%d-%d"`, f.holder, f.sharedWaiter),
			fmt.Sprintf(`<g class="node" id="node-%d"`, f.holder),
			fmt.Sprintf(`<g class="node waiting" id="node-%d"`, f.middle),
			fmt.Sprintf(`<g class="node waiting" id="node-%d"`, f.tail),
		} {
			if !strings.Contains(dom, want) {
				t.Errorf("the rendered page lacks %s", want)
			}
		}
		// middle and sharedWaiter both wait for night, one queued behind
		// the other, which pg_blocking_pids reports as a blocker too:
		// one arrow joins them, in the queue's order.
		ab, ba := fmt.Sprintf(`id="edge-%d-%d"`, f.middle, f.sharedWaiter), fmt.Sprintf(`id="edge-%d-%d"`, f.sharedWaiter, f.middle)
		if strings.Contains(dom, ab) == strings.Contains(dom, ba) {
			t.Errorf("want one of %s and %s in the wait graph", ab, ba)
		}
		if n := strings.Count(dom, `<path class="edge`); n != 4 {
			t.Errorf("the wait graph has %d arrows, want 4", n)
		}
		if strings.Contains(dom, fmt.Sprintf(`id="node-%d"`, f.sharer1)) {
			t.Error("a holder that blocks nobody is in the wait graph")
		}
		if t.Failed() {
			t.Logf("rendered DOM:\n%s", dom)
		}

		dir := os.Getenv(envArtifacts)
		if dir == "" {
			dir = t.TempDir()
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(dir, "serve-page-"+s.Name+".png")
		runChromium(t, bin, srv.url+"/?refresh=0", "--screenshot="+shot, "--window-size=1280,900", "--hide-scrollbars")
		png, err := os.ReadFile(shot)
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("screenshot %s: %v, %d bytes, not a PNG", shot, err, len(png))
		}
		t.Logf("screenshot of the page: %s (%d bytes)", shot, len(png))

		srv.stop(t)
	})
}

// serveWait takes a session lock (shared if shared) on conn in a
// goroutine, which waits for it in one plain pg_advisory_lock statement:
// unlike the library's wait, which waits in slices and leaves the queue
// between two of them, it stays queued, so the page always shows it. At
// t's cleanup a wait still going is cancelled, and the goroutine has
// ended before the test does.
func serveWait(t *testing.T, conn *sql.Conn, key advisory.Key, shared bool) {
	fn := "pg_catalog.pg_advisory_lock"
	if shared {
		fn = "pg_catalog.pg_advisory_lock_shared"
	}
	query, args := fn+"($1::int8)", []any{}
	if k1, k2, ok := key.Pair(); ok {
		query, args = fn+"($1::int4, $2::int4)", []any{k1, k2}
	} else {
		v, _ := key.Int64()
		args = []any{v}
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_, _ = conn.ExecContext(ctx, "SELECT "+query, args...)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
}
