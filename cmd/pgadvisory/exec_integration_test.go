package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// hold takes key as a lease in the test's own session, released at the
// test's end.
func hold(t *testing.T, s *pgtest.Server, key advisory.Key, opts ...advisory.LeaseOption) *advisory.Lease {
	t.Helper()
	db := s.Open(t, pgtest.DriverPGX)
	l, err := advisory.Acquire(testContext(t), db, key, append(opts, advisory.Try())...)
	if err != nil {
		t.Fatalf("holding %v: %v", key, err)
	}
	t.Cleanup(func() { l.Release(t.Context()) })
	return l
}

// TestExecExitCodes checks every exit code of exec that does not need a
// signal: the command's own, a conflict with -n, a wait that runs out with
// -w, and a command that cannot be run.
func TestExecExitCodes(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		env := cliEnv("DATABASE_URL=" + s.DSN)
		hold(t, s, advisory.Int64Key(9002))
		hold(t, s, advisory.Int64Key(9003), advisory.Shared())
		marker := filepath.Join(t.TempDir(), "ran")
		touch := []string{"--", "sh", "-c", `touch "$0"`, marker}

		cases := []struct {
			name    string
			args    []string
			code    int
			ran     bool   // the command ran
			stderr  string // in pgadvisory's stderr
			atLeast time.Duration
		}{
			{name: "ChildSuccess", args: append([]string{"exec", "9001"}, touch...), code: 0, ran: true},
			{name: "ChildFailure", args: []string{"exec", "9001", "--", "sh", "-c", "exit 7"}, code: 7},
			{name: "ChildKilled", args: []string{"exec", "9001", "--", "sh", "-c", "kill -KILL $$"}, code: 128 + 9},
			{name: "NotFound", args: []string{"exec", "9001", "--", "/nonexistent/command"}, code: 127, stderr: "no such file"},
			{name: "ConflictNonblock", args: append([]string{"exec", "-n", "9002"}, touch...), code: 1, stderr: "lock 9002 is held by pid "},
			{name: "ConflictLongFlags", args: append([]string{"exec", "--nonblock", "--conflict-exit-code", "9", "9002"}, touch...), code: 9},
			{name: "ConflictExitCode", args: append([]string{"exec", "-n", "-E", "0", "9002"}, touch...), code: 0},
			{name: "Wait", args: append([]string{"exec", "-w", "300ms", "9002"}, touch...), code: 1, stderr: "gave up waiting after 300ms", atLeast: 300 * time.Millisecond},
			{name: "WaitSeconds", args: append([]string{"exec", "--wait", "0.2", "-E", "4", "9002"}, touch...), code: 4, atLeast: 200 * time.Millisecond},
			{name: "WaitZeroDoesNotWait", args: append([]string{"exec", "-w", "0", "-E", "4", "9002"}, touch...), code: 4, stderr: "lock 9002 is held by pid "},
			{name: "SharedWithShared", args: append([]string{"exec", "-s", "-n", "9003"}, touch...), code: 0, ran: true},
			{name: "ExclusiveWithShared", args: append([]string{"exec", "-n", "9003"}, touch...), code: 1},
			{name: "PairKey", args: append([]string{"exec", "-n", "9002:1"}, touch...), code: 0, ran: true},
			{name: "NegativeKey", args: append([]string{"exec", "-n", "--", "-9002"}, touch...), code: 0, ran: true},
			{name: "UsageNoCommand", args: []string{"exec", "9001"}, code: 64, stderr: "no command given"},
			{name: "UsageBareName", args: []string{"exec", "nightly", "--", "true"}, code: 64, stderr: "a bare name is not a key"},
			{name: "UsageFlagAfterKey", args: []string{"exec", "9001", "-n", "--", "true"}, code: 64, stderr: "flags go before KEY"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				os.Remove(marker)
				r := runCLI(t, env, c.args...)
				if r.code != c.code {
					t.Fatalf("pgadvisory %v: exit %d, want %d\nstdout: %s\nstderr: %s", c.args, r.code, c.code, r.stdout, r.stderr)
				}
				if _, err := os.Stat(marker); (err == nil) != c.ran {
					t.Errorf("command ran: %v, want %v", err == nil, c.ran)
				}
				if !strings.Contains(r.stderr, c.stderr) {
					t.Errorf("stderr %q does not contain %q", r.stderr, c.stderr)
				}
				if r.elapsed < c.atLeast {
					t.Errorf("exited after %v, before the wait of %v ran out", r.elapsed, c.atLeast)
				}
			})
		}
	})
}

// TestExecEnvironment checks what the command is told: its key and a
// fencing token that grows with each holder, and that every way of naming
// the database works.
func TestExecEnvironment(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		u, err := url.Parse(s.DSN)
		if err != nil {
			t.Fatal(err)
		}
		show := []string{"--", "sh", "-c", `echo "$PGADVISORY_LOCK_KEY $PGADVISORY_FENCING_TOKEN"`}
		runs := []struct {
			name string
			env  []string
			args []string
		}{
			{"DatabaseURL", cliEnv("DATABASE_URL=" + s.DSN), []string{"exec", "7:nightly"}},
			{"DSNFlag", cliEnv("DATABASE_URL=postgres://nobody@127.0.0.1:1/none"), []string{"exec", "--dsn", s.DSN, "7:nightly"}},
			{"PGVariables", cliEnv("PGHOST="+u.Hostname(), "PGPORT="+u.Port(), "PGUSER="+u.User.Username(),
				"PGDATABASE="+strings.TrimPrefix(u.Path, "/"), "PGSSLMODE=disable"), []string{"exec", "7:nightly"}},
		}
		want := advisory.NameKey(7, "nightly").String()
		var last int64
		for _, run := range runs {
			t.Run(run.name, func(t *testing.T) {
				r := runCLI(t, run.env, append(run.args, show...)...)
				if r.code != 0 {
					t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
				}
				f := strings.Fields(r.stdout)
				if len(f) != 2 || f[0] != want {
					t.Fatalf("command saw %q, want key %s and a token", r.stdout, want)
				}
				token, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil || token <= last {
					t.Errorf("token %q after %d: want a larger one", f[1], last)
				}
				last = token
			})
		}
	})
}

// TestExecSignals checks that signals to pgadvisory reach the command, and
// that the command's exit code is pgadvisory's.
func TestExecSignals(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		p := start(t, cliEnv("DATABASE_URL="+s.DSN), "exec", "9101", "--", "sh", "-c",
			`trap 'echo got-USR1' USR1; trap 'echo got-TERM; exit 42' TERM; echo ready; while :; do sleep 0.05; done`)
		p.awaitOutput(t, "ready")
		p.cmd.Process.Signal(syscall.SIGUSR1)
		p.awaitOutput(t, "got-USR1")
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t); code != 42 {
			t.Fatalf("exit %d, want the command's 42\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
		}
		if !strings.Contains(p.stdout.String(), "got-TERM") {
			t.Errorf("the command did not get SIGTERM: %s", p.stdout)
		}
		pgtest.AwaitFree(t, db, advisory.Int64Key(9101))
	})
}

// TestExecLockLost terminates the backend that holds exec's lock: the
// command gets SIGTERM, which it ignores, then SIGKILL after the grace
// period, within two heartbeats and the grace of the loss, and pgadvisory
// exits with 75 saying why.
func TestExecLockLost(t *testing.T) {
	const (
		heartbeat = 250 * time.Millisecond
		grace     = 500 * time.Millisecond
		slack     = 1500 * time.Millisecond // process start and a loaded machine
	)
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		key := advisory.Int64Key(9201)
		p := start(t, cliEnv("DATABASE_URL="+s.DSN), "exec", "--heartbeat", heartbeat.String(), "--grace", grace.String(), "9201", "--",
			"sh", "-c", `trap 'echo term-ignored' TERM; echo ready; while :; do sleep 0.05; done`)
		p.awaitOutput(t, "ready")
		locks, err := pgtest.LocksOf(testContext(t), db, key)
		if err != nil || len(locks) != 1 {
			t.Fatalf("locks on %v: %v, %v", key, locks, err)
		}
		if _, err := db.Exec(`SELECT pg_terminate_backend($1)`, locks[0].PID); err != nil {
			t.Fatal(err)
		}
		terminated := time.Now()
		code := p.wait(t)
		took := time.Since(terminated)
		if code != exitLost {
			t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitLost, p.stdout, p.stderr)
		}
		if limit := 2*heartbeat + grace + slack; took > limit {
			t.Errorf("the command ended %v after the loss, want within %v", took, limit)
		}
		if took < grace {
			t.Errorf("the command ended %v after the loss, before the grace of %v", took, grace)
		}
		if !strings.Contains(p.stdout.String(), "term-ignored") {
			t.Errorf("the command got no SIGTERM before SIGKILL: %s", p.stdout)
		}
		for _, want := range []string{"lock 9201 lost while the command ran", "57P01", "killing it", "signal: killed"} {
			if !strings.Contains(p.stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, p.stderr)
			}
		}
	})
}
