//go:build unix

package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// How long a stopped pgadvisory may leave a session behind.
const (
	// stoppedBound is for SIGTERM and SIGINT: pgadvisory has the server
	// end its session before it exits, so the bound is only slack for
	// the query that looks. It is shorter than a second, the length of
	// the slices the library may wait in, which end a wait left behind
	// too, so that they cannot hide one.
	stoppedBound = 250 * time.Millisecond
	// killedBound is for SIGKILL: the server sees the client gone at its
	// next connection check (checkInterval), on a loaded machine a
	// little later.
	killedBound = checkInterval + 4*time.Second
)

// stopRuns is how often each signal is tried: the races these tests
// catch did not show on every run.
const stopRuns = 3

// TestExecStoppedWhileWaiting stops a pgadvisory exec that waits for a
// key another session holds, with each signal, several times: no session
// of the command may wait for the key once pgadvisory has exited (after
// SIGKILL, within a few seconds), and none may take it when the holder
// lets go.
//
// After SIGTERM and SIGINT the command must end the wait itself: its
// sessions check for a client gone only every hour (PGOPTIONS, which the
// command leaves as it is), so the server's own check cannot end a wait
// left behind within the bound.
func TestExecStoppedWhileWaiting(t *testing.T) {
	const noCheck = "PGOPTIONS=-c client_connection_check_interval=1h"
	signals := []struct {
		name  string
		sig   syscall.Signal
		env   []string // more environment for pgadvisory
		bound time.Duration
		code  int // pgadvisory's exit code; -1: killed
	}{
		{"SIGTERM", syscall.SIGTERM, []string{noCheck}, stoppedBound, exitSignal + int(syscall.SIGTERM)},
		{"SIGINT", syscall.SIGINT, []string{noCheck}, stoppedBound, exitSignal + int(syscall.SIGINT)},
		{"SIGKILL", syscall.SIGKILL, nil, killedBound, -1},
	}
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		for i, sg := range signals {
			for run := 1; run <= stopRuns; run++ {
				t.Run(fmt.Sprintf("%s/%d", sg.name, run), func(t *testing.T) {
					k := int64(9300 + 10*i + run)
					key := advisory.Int64Key(k)
					app := pgtest.UniqueName("pgadvisory-stop-")
					holder := holdSQL(t, db, k)
					env := cliEnv(append([]string{"DATABASE_URL=" + s.DSN, "PGAPPNAME=" + app}, sg.env...)...)
					p := start(t, env, "exec", "-w", "60s", key.String(), "--", "sleep", "60")
					pgtest.AwaitWaiting(t, db, key)
					if got := sessionsOf(t, db, app); len(got) != 1 {
						t.Fatalf("pgadvisory has %d sessions, want 1: %v", len(got), got)
					}
					p.cmd.Process.Signal(sg.sig)
					code := p.wait(t)
					if code != sg.code {
						t.Errorf("exit %d, want %d\nstderr: %s", code, sg.code, p.stderr)
					}
					awaitNoSessions(t, db, app, sg.bound)

					// The holder lets go: the key is free for anyone,
					// and nothing of the command's takes it.
					pgtest.Exec(t, holder, "SELECT pg_advisory_unlock($1)", k)
					var took bool
					if err := holder.QueryRowContext(testContext(t), "SELECT pg_try_advisory_lock($1)", k).Scan(&took); err != nil || !took {
						t.Fatalf("taking %v after the holder let go: %v, %v (pg_locks: %v)", key, took, err, locksOf(t, db, key))
					}
					if got := sessionsOf(t, db, app); len(got) != 0 {
						t.Errorf("sessions of the command after the holder let go: %v", got)
					}
				})
			}
		}
	})
}

// TestExecKilledStopsCommand kills pgadvisory with SIGKILL while its
// command runs under the lock, several times: on Linux the command dies
// with it, and a second exec -n on the key never runs while the first
// command still does.
func TestExecKilledStopsCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the command outlives a killed pgadvisory where there is no parent-death signal")
	}
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		env := cliEnv("DATABASE_URL=" + s.DSN)
		for run := 1; run <= stopRuns; run++ {
			t.Run(strconv.Itoa(run), func(t *testing.T) {
				k := int64(9400 + run)
				key := strconv.FormatInt(k, 10)
				p := start(t, env, "exec", "-n", key, "--", "sh", "-c", `echo "child $$"; exec sleep 60`)
				p.awaitOutput(t, "\n")
				child, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(p.stdout.String(), "child ")))
				if err != nil {
					t.Fatalf("the command's pid: %v (stdout %q)", err, p.stdout)
				}
				t.Cleanup(func() { stopSleep(child) })
				if locks := locksOf(t, db, advisory.Int64Key(k)); len(locks) != 1 || !locks[0].Granted {
					t.Fatalf("pg_locks on %s while the command runs: %v, want one holder", key, locks)
				}

				p.cmd.Process.Signal(syscall.SIGKILL)
				// Try the key at once and until it is free; the second
				// command reports the first's state as /proc has it.
				var second result
				err = pollUntil(10*time.Second, func() (bool, error) {
					second = runCLI(t, env, "exec", "-n", key, "--", "sh", "-c",
						`echo "state:$(cut -d' ' -f3 "/proc/$0/stat" 2>/dev/null)"`, strconv.Itoa(child))
					switch second.code {
					case exitConflict:
						return false, nil
					case 0:
						return true, nil
					}
					return false, fmt.Errorf("second exec: exit %d\nstderr: %s", second.code, second.stderr)
				})
				if err != nil {
					t.Fatalf("the key did not become free: %v", err)
				}
				if state := strings.TrimSpace(strings.TrimPrefix(second.stdout, "state:")); !gone(state) {
					t.Errorf("the second exec ran while the first command (pid %d) was still in state %q", child, state)
				}
				p.wait(t)
				err = pollUntil(2*time.Second, func() (bool, error) { return gone(procState(child)), nil })
				if err != nil {
					t.Errorf("the command (pid %d) outlived pgadvisory: state %q: %v", child, procState(child), err)
				}
			})
		}
	})
}

// holdSQL takes the bigint key with plain SQL on a session of the test's
// own, and returns the session. The session, and what it holds, ends at
// the test's end.
func holdSQL(t *testing.T, db *sql.DB, key int64) *sql.Conn {
	t.Helper()
	conn := pgtest.Conn(t, db)
	pgtest.Exec(t, conn, "SELECT pg_advisory_lock($1)", key)
	t.Cleanup(func() { conn.Raw(func(any) error { return driver.ErrBadConn }) })
	return conn
}

// sessionsOf returns the sessions named app, as "pid state wait_event".
func sessionsOf(t *testing.T, db *sql.DB, app string) []string {
	t.Helper()
	rows, err := db.QueryContext(testContext(t), `SELECT pid, coalesce(state, ''), coalesce(wait_event_type || ':' || wait_event, '')
FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var pid int
		var state, wait string
		if err := rows.Scan(&pid, &state, &wait); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("pid %d %s %s", pid, state, wait))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// awaitNoSessions fails t unless no session named app is left within
// bound.
func awaitNoSessions(t *testing.T, db *sql.DB, app string, bound time.Duration) {
	t.Helper()
	var left []string
	if err := pollUntil(bound, func() (bool, error) {
		left = sessionsOf(t, db, app)
		return len(left) == 0, nil
	}); err != nil {
		t.Fatalf("sessions of the stopped command: %v: %v", left, err)
	}
}

// locksOf returns what pg_locks shows for key, for a failure's message.
func locksOf(t *testing.T, db *sql.DB, key advisory.Key) []pgtest.Lock {
	t.Helper()
	locks, err := pgtest.LocksOf(context.Background(), db, key)
	if err != nil {
		t.Error(err)
	}
	return locks
}

// pollUntil is [pgtest.Poll] with a deadline of bound: cond must report
// true within it.
func pollUntil(bound time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(bound)
	return pgtest.Poll(5*time.Millisecond, func() (bool, error) {
		ok, err := cond()
		if err == nil && !ok && time.Now().After(deadline) {
			err = fmt.Errorf("still not so after %v", bound)
		}
		return ok, err
	})
}

// procState returns the state of process pid as /proc shows it ("S",
// "R", "Z", ...), or "" when there is no such process.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The name, in parentheses, may hold spaces: the state follows the
	// last parenthesis.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// stopSleep kills process pid if it is still the test's sleep, so that a
// failed test leaves nothing running, and kills nothing else.
func stopSleep(pid int) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err == nil && strings.TrimSpace(string(comm)) == "sleep" {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// gone reports whether a process in state (as procState returns it) has
// stopped running: it does not exist, or only its exit status is left.
func gone(state string) bool {
	return state == "" || state == "Z" || state == "X"
}
