//go:build unix

package main

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// envOf reads the output of env(1) into a map.
func envOf(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestExecConnectionEnvIntegration checks that the command is told the
// connection pgadvisory used, from DATABASE_URL or --dsn in either form,
// with the key and the token, and that a libpq program and pgadvisory
// itself, given nothing else, reach the same database through it.
func TestExecConnectionEnvIntegration(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		u, err := url.Parse(s.DSN)
		if err != nil {
			t.Fatal(err)
		}
		// The servers trust every connection: the password is never
		// asked for, but it is still the DSN's, and passed on.
		withPassword := *u
		withPassword.User = url.UserPassword(u.User.Username(), "pw-from-dsn")
		dsn := withPassword.String()
		host, port, db, user := u.Hostname(), u.Port(), strings.TrimPrefix(u.Path, "/"), u.User.Username()
		keyword := "host=" + host + " port=" + port + " dbname=" + db + " user=" + user + " sslmode=disable password=pw-from-kv"
		key := advisory.NameKey(7, "env")

		runs := []struct {
			name string
			env  []string
			args []string
			want map[string]string // "": must not be set
		}{
			{"DatabaseURL", cliEnv("DATABASE_URL=" + dsn), []string{"exec", "7:env"},
				map[string]string{"PGHOST": host, "PGPORT": port, "PGDATABASE": db, "PGUSER": user, "PGSSLMODE": "disable",
					"PGPASSWORD": "pw-from-dsn", "DATABASE_URL": dsn, "PGADVISORY_LOCK_KEY": key.String(), "PGADVISORY_SLOT": ""}},
			{"DSNFlagKeywordValue", cliEnv("DATABASE_URL=postgres://nobody@127.0.0.1:1/elsewhere", "PGHOST=elsewhere.invalid"),
				[]string{"exec", "--dsn", keyword, "7:env"},
				map[string]string{"PGHOST": host, "PGPORT": port, "PGDATABASE": db, "PGUSER": user, "PGSSLMODE": "disable",
					"PGPASSWORD": "pw-from-kv", "DATABASE_URL": "", "PGADVISORY_LOCK_KEY": key.String()}},
			{"DSNFlagURL", cliEnv("DATABASE_URL=postgres://nobody@127.0.0.1:1/elsewhere"), []string{"exec", "--dsn", s.DSN, "7:env"},
				map[string]string{"PGHOST": host, "DATABASE_URL": s.DSN, "PGPASSWORD": ""}},
			{"NoFencing", cliEnv("DATABASE_URL=" + s.DSN), []string{"exec", "--no-fencing", "7:env"},
				map[string]string{"PGADVISORY_FENCING_TOKEN": "", "PGADVISORY_LOCK_KEY": key.String()}},
			{"NoPGEnv", cliEnv("DATABASE_URL=" + s.DSN), []string{"exec", "--no-pg-env", "7:env"},
				map[string]string{"PGHOST": "", "PGPORT": "", "DATABASE_URL": s.DSN, "PGADVISORY_LOCK_KEY": key.String()}},
			{"NestedSeesInner", cliEnv("DATABASE_URL="+s.DSN, "PGADVISORY_FENCING_TOKEN=1", "PGADVISORY_SLOT=5"),
				[]string{"exec", "--no-fencing", "7:env"},
				map[string]string{"PGADVISORY_FENCING_TOKEN": "", "PGADVISORY_SLOT": ""}},
		}
		for _, run := range runs {
			t.Run(run.name, func(t *testing.T) {
				r := runCLI(t, run.env, append(run.args, "--", "env")...)
				if r.code != 0 {
					t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
				}
				got := envOf(r.stdout)
				for k, want := range run.want {
					v, ok := got[k]
					switch {
					case want == "" && ok:
						t.Errorf("%s=%s, want it unset", k, v)
					case want != "" && v != want:
						t.Errorf("%s=%q, want %q", k, v, want)
					}
				}
				if run.want["PGADVISORY_FENCING_TOKEN"] == "" && !strings.Contains(run.name, "Fencing") && run.name != "NestedSeesInner" {
					if tok, err := strconv.ParseInt(got["PGADVISORY_FENCING_TOKEN"], 10, 64); err != nil || tok <= 0 {
						t.Errorf("PGADVISORY_FENCING_TOKEN=%q, want a token", got["PGADVISORY_FENCING_TOKEN"])
					}
				}
			})
		}

		// A child told only the PG* variables (no DATABASE_URL) sees
		// the lock its parent holds: it reached the same database.
		t.Run("ChildReachesSameDatabase", func(t *testing.T) {
			r := runCLI(t, cliEnv("DATABASE_URL="+s.DSN), "exec", "9301", "--",
				"sh", "-c", `unset DATABASE_URL; exec "$0" locks --json`, binary(t))
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			var locks []jsonLock
			if err := json.Unmarshal([]byte(r.stdout), &locks); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			found := false
			for _, l := range locks {
				found = found || l.Key == "9301" && l.Granted && l.ApplicationName == "pgadvisory exec"
			}
			if !found {
				t.Errorf("the child did not see its parent's lock 9301: %s", r.stdout)
			}
		})
		t.Run("Psql", func(t *testing.T) {
			if _, err := exec.LookPath("psql"); err != nil {
				t.Skip("no psql on PATH")
			}
			r := runCLI(t, cliEnv("DATABASE_URL="+s.DSN), "exec", "9302", "--", "psql", "-XAtc",
				`SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objid = 9302 AND granted`)
			if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
				t.Errorf("psql under exec: exit %d, stdout %q, want 1 lock on 9302\nstderr: %s", r.code, r.stdout, r.stderr)
			}
		})
		// A server parameter the DSN sets reaches the child's sessions
		// through PGOPTIONS, after the options it inherited.
		t.Run("PsqlGetsServerParameters", func(t *testing.T) {
			if _, err := exec.LookPath("psql"); err != nil {
				t.Skip("no psql on PATH")
			}
			withParams := *u
			withParams.RawQuery = strings.TrimPrefix(withParams.RawQuery+"&statement_timeout=4321ms&search_path=pg_catalog,%20public", "&")
			r := runCLI(t, cliEnv("DATABASE_URL="+withParams.String(), "PGOPTIONS=-c work_mem=7MB"), "exec", "9303", "--", "psql", "-XAtc",
				"SELECT pg_catalog.current_setting('statement_timeout') || ' ' || pg_catalog.current_setting('search_path') || ' ' || pg_catalog.current_setting('work_mem')")
			if want := "4321ms pg_catalog, public 7MB"; r.code != 0 || strings.TrimSpace(r.stdout) != want {
				t.Errorf("psql under exec: exit %d, stdout %q, want %q\nstderr: %s", r.code, r.stdout, want, r.stderr)
			}
		})
	})
}

// TestExecConflictNamesHolderIntegration checks that -n and -w name the
// session in the way: its PID, application_name and age.
func TestExecConflictNamesHolderIntegration(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		conn, pid := session(t, db, "cli-test-blocker")
		if err := advisory.Lock(testContext(t), conn, advisory.Int64Key(9311)); err != nil {
			t.Fatal(err)
		}
		env := cliEnv("DATABASE_URL=" + s.DSN)
		holder := "pid " + strconv.Itoa(pid) + ` (application_name "cli-test-blocker", for at most `
		for _, c := range []struct {
			name string
			args []string
			say  string
		}{
			{"Nonblock", []string{"exec", "-n", "9311"}, "lock 9311 is held by " + holder},
			{"WaitZero", []string{"exec", "-w", "0", "9311"}, "lock 9311 is held by " + holder},
			{"Wait", []string{"exec", "-w", "200ms", "9311"}, "lock 9311: gave up waiting after 200ms; held by " + holder},
			{"SharedMeetsExclusive", []string{"exec", "-ns", "9311"}, "lock 9311 is held by " + holder},
			{"Limit", []string{"exec", "-n", "--limit", "1", "9311"}, "every one of the 1 slots from 9311 is held by " + holder},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := runCLI(t, env, append(c.args, "--", "true")...)
				if r.code != exitConflict || !strings.Contains(r.stderr, c.say) {
					t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, exitConflict, c.say)
				}
			})
		}
	})
}

// TestExecLimitIntegration runs three execs with --limit 2 at once: two
// run their commands, the third waits in the server until one of them
// ends, and no command ever sees more than two running, each in a slot
// of its own.
func TestExecLimitIntegration(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		dir := t.TempDir()
		// Each command marks itself running, counts the commands
		// running, waits for the go file, and unmarks itself before it
		// exits, so before its slot is released.
		script := `d=$0
touch "$d/run.$$"
echo "$(ls "$d" | grep -c '^run\.') $PGADVISORY_SLOT $PGADVISORY_LIMIT $PGADVISORY_LOCK_KEY" >> "$d/seen"
i=0; while [ ! -e "$d/go" ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 3; sleep 0.01; done
rm "$d/run.$$"`
		env := cliEnv("DATABASE_URL=" + s.DSN)
		var procs []*proc
		for range 3 {
			procs = append(procs, start(t, env, "exec", "--limit", "2", "9400", "--", "sh", "-c", script, dir))
		}
		running := func() int {
			m, _ := filepath.Glob(filepath.Join(dir, "run.*"))
			return len(m)
		}
		pgtest.Await(t, "two commands to run", func() (bool, error) { return running() == 2, nil })
		// The third waits, in the server, for one of the two slots.
		pgtest.Await(t, "the third exec to wait for a slot", func() (bool, error) {
			for _, k := range []advisory.Key{advisory.Int64Key(9400), advisory.Int64Key(9401)} {
				locks, err := pgtest.LocksOf(testContext(t), db, k)
				if err != nil {
					return false, err
				}
				for _, l := range locks {
					if !l.Granted {
						return true, nil
					}
				}
			}
			return false, nil
		})
		if n := running(); n != 2 {
			t.Fatalf("%d commands run while one waits, want 2", n)
		}
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, p := range procs {
			if code := p.wait(t); code != 0 {
				t.Errorf("exec %d: exit %d\nstderr: %s", i, code, p.stderr)
			}
		}
		seen, err := os.ReadFile(filepath.Join(dir, "seen"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(seen)), "\n")
		if len(lines) != 3 {
			t.Fatalf("%d commands ran, want 3:\n%s", len(lines), seen)
		}
		slots := map[string]bool{}
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("a command saw %q", line)
			}
			if n, _ := strconv.Atoi(f[0]); n < 1 || n > 2 {
				t.Errorf("a command saw %s running, want at most 2", f[0])
			}
			if f[1] != "0" && f[1] != "1" || f[2] != "2" || f[3] != "940"+f[1] {
				t.Errorf("a command saw slot %s of %s, key %s; want slot 0 or 1 of 2, key 9400 or 9401", f[1], f[2], f[3])
			}
			slots[f[1]] = true
		}
		if len(slots) != 2 {
			t.Errorf("the commands held slots %v, want both", slots)
		}
		pgtest.AwaitFree(t, db, advisory.Int64Key(9400))
		pgtest.AwaitFree(t, db, advisory.Int64Key(9401))
	})
}

// TestExecSharedIntegration runs two shared execs whose commands each
// wait for the other to start, so that both finish only if they run at
// once, and then an exclusive exec that waits while a shared one holds the
// key.
func TestExecSharedIntegration(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		dir := t.TempDir()
		env := cliEnv("DATABASE_URL=" + s.DSN)
		// awaitFile touches $1 and waits (at most 30s) for $2.
		const awaitFile = `touch "$0/$1"; i=0; while [ ! -e "$0/$2" ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 3; sleep 0.01; done`

		a := start(t, env, "exec", "-s", "9501", "--", "sh", "-c", awaitFile, dir, "a", "b")
		b := start(t, env, "exec", "--shared", "9501", "--", "sh", "-c", awaitFile, dir, "b", "a")
		for name, p := range map[string]*proc{"a": a, "b": b} {
			if code := p.wait(t); code != 0 {
				t.Fatalf("shared exec %s: exit %d (3: the other never ran alongside)\nstderr: %s", name, code, p.stderr)
			}
		}

		shared := start(t, env, "exec", "-s", "9501", "--", "sh", "-c", awaitFile, dir, "shared", "go")
		pgtest.Await(t, "the shared command to run", func() (bool, error) {
			_, err := os.Stat(filepath.Join(dir, "shared"))
			return err == nil, nil
		})
		exclusive := start(t, env, "exec", "9501", "--", "sh", "-c", `touch "$0/exclusive"`, dir)
		pgtest.AwaitWaiting(t, db, advisory.Int64Key(9501))
		if _, err := os.Stat(filepath.Join(dir, "exclusive")); err == nil {
			t.Fatal("the exclusive command ran while a shared holder held the key")
		}
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := shared.wait(t); code != 0 {
			t.Fatalf("shared exec: exit %d\nstderr: %s", code, shared.stderr)
		}
		if code := exclusive.wait(t); code != 0 {
			t.Fatalf("exclusive exec: exit %d\nstderr: %s", code, exclusive.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "exclusive")); err != nil {
			t.Error("the exclusive command did not run once the shared holder let go")
		}
	})
}

// TestExecInterruptedIntegration checks what exec says when a signal
// ends its wait.
func TestExecInterruptedIntegration(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		hold(t, s, advisory.Int64Key(9601))
		for _, c := range []struct {
			name string
			args []string
			say  string
		}{
			{"Lock", []string{"exec", "9601"}, "interrupted by SIGTERM while waiting for lock 9601\n"},
			{"Slot", []string{"exec", "--limit", "1", "9601"}, "interrupted by SIGTERM while waiting for one of the 1 slots from 9601\n"},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := start(t, cliEnv("DATABASE_URL="+s.DSN), append(c.args, "--", "true")...)
				pgtest.AwaitWaiting(t, db, advisory.Int64Key(9601))
				p.cmd.Process.Signal(syscall.SIGTERM)
				if code := p.wait(t); code != exitSignal+int(syscall.SIGTERM) {
					t.Errorf("exit %d, want %d", code, exitSignal+int(syscall.SIGTERM))
				}
				if !strings.Contains(p.stderr.String(), c.say) {
					t.Errorf("stderr %q does not say %q", p.stderr, c.say)
				}
			})
		}
	})
}

// TestLocksWatchIntegration runs locks --watch into a pipe: no control
// codes, one block per refresh, each beginning with its time after a blank
// line; with --json, one array a line.
func TestLocksWatchIntegration(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		hold(t, s, advisory.Int64Key(9701))
		env := cliEnv("DATABASE_URL=" + s.DSN)
		t.Run("Table", func(t *testing.T) {
			p := start(t, env, "locks", "--watch", "100ms")
			pgtest.Await(t, "three refreshes", func() (bool, error) { return strings.Count(p.stdout.String(), "KEY ") >= 3, nil })
			p.cmd.Process.Signal(syscall.SIGINT)
			if code := p.wait(t); code != 0 {
				t.Fatalf("exit %d: %s", code, p.stderr)
			}
			out := p.stdout.String()
			if strings.ContainsRune(out, '\033') {
				t.Errorf("control codes written into a pipe: %q", out)
			}
			// Each refresh: its time, a blank line, the table; a blank
			// line before the next.
			stamp := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n\n`)
			starts := stamp.FindAllStringIndex(out, -1)
			if len(starts) < 3 || starts[0][0] != 0 {
				t.Fatalf("want refreshes that begin with their time:\n%s", out)
			}
			for i, st := range starts {
				end := len(out)
				if i+1 < len(starts) {
					end = starts[i+1][0]
					if !strings.HasSuffix(out[:end], "\n\n") {
						t.Errorf("refresh %d is not followed by a blank line:\n%s", i, out)
					}
				}
				if block := out[st[1]:end]; !strings.HasPrefix(block, "KEY ") || !strings.Contains(block, "9701 ") {
					t.Errorf("refresh %d is not a table of the locks:\n%s", i, block)
				}
			}
		})
		t.Run("JSON", func(t *testing.T) {
			p := start(t, env, "locks", "--watch", "100ms", "--json")
			pgtest.Await(t, "two refreshes", func() (bool, error) { return strings.Count(p.stdout.String(), "\n") >= 2, nil })
			p.cmd.Process.Signal(syscall.SIGINT)
			p.wait(t)
			for _, line := range strings.Split(strings.TrimSpace(p.stdout.String()), "\n") {
				var locks []jsonLock
				if err := json.Unmarshal([]byte(line), &locks); err != nil {
					t.Errorf("a refresh is not one JSON array on a line: %v: %q", err, line)
				}
			}
		})
	})
}
