package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// psql returns the command line that runs psql against s: the psql inside
// s's container when pgtest runs s in Docker, found by its published port
// and this test binary's label, or else the host's psql with s's DSN.
// It reports which.
func psql(t *testing.T, s *pgtest.Server) (argv []string, where string) {
	t.Helper()
	u, err := url.Parse(s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	opts := []string{"-X", "-q", "-v", "ON_ERROR_STOP=1"}
	out, err := exec.Command("docker", "ps", "-q",
		"--filter", "label=pgadvisory.pgtest.pid="+strconv.Itoa(os.Getpid()),
		"--filter", "publish="+u.Port()).Output()
	if ids := strings.Fields(string(out)); err == nil && len(ids) == 1 {
		return append([]string{"docker", "exec", ids[0], "psql", "-h", "127.0.0.1", "-U", u.User.Username(),
			"-d", strings.TrimPrefix(u.Path, "/")}, opts...), "psql in container " + ids[0]
	}
	path, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("no container and no psql on PATH")
	}
	return append([]string{path, "-d", s.DSN}, opts...), "host " + path
}

// TestMigrationTrap replays the three-psql trap: a script that takes the
// lock with one psql call, migrates with a second and unlocks with a third
// holds the lock only for the first call, since each psql is a session of
// its own, so two such migrations overlap. Run under pgadvisory exec, which
// holds the lock for the whole command, migrations never overlap.
func TestMigrationTrap(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		db := s.Open(t, pgtest.DriverPGX)
		if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS migration_runs (run text, runner int, started timestamptz, finished timestamptz)`); err != nil {
			t.Fatal(err)
		}
		base, where := psql(t, s)
		t.Logf("psql: %s", where)
		migrate := func(run string, runner int, sleep string) []string {
			return append(append([]string(nil), base...),
				"-c", fmt.Sprintf(`INSERT INTO migration_runs VALUES ('%s', %d, clock_timestamp(), NULL)`, run, runner),
				"-c", "SELECT pg_sleep("+sleep+")",
				"-c", fmt.Sprintf(`UPDATE migration_runs SET finished = clock_timestamp() WHERE run = '%s' AND runner = %d`, run, runner))
		}
		sh := func(argv []string, env []string) error {
			c := exec.Command(argv[0], argv[1:]...)
			c.Env = env
			if out, err := c.CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %v\n%s", argv, err, out)
			}
			return nil
		}
		concurrently := func(n int, f func(i int) error) {
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = f(i) }()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		overlaps := func(run string) (n, done int) {
			t.Helper()
			err := db.QueryRow(`SELECT
				(SELECT count(*) FROM migration_runs a JOIN migration_runs b
					ON a.run = b.run AND a.runner < b.runner
					AND a.started < b.finished AND b.started < a.finished
				 WHERE a.run = $1),
				(SELECT count(*) FROM migration_runs WHERE run = $1 AND finished IS NOT NULL)`, run).Scan(&n, &done)
			if err != nil {
				t.Fatal(err)
			}
			return n, done
		}

		// The trap: lock, migrate and unlock are three psql sessions.
		const runners = 3
		concurrently(runners, func(i int) error {
			steps := [][]string{
				append(append([]string(nil), base...), "-c", "SELECT pg_advisory_lock(4242)"),
				migrate("psql", i, "1"),
				append(append([]string(nil), base...), "-c", "SELECT pg_advisory_unlock(4242)"),
			}
			for _, step := range steps {
				if err := sh(step, cliEnv()); err != nil {
					return err
				}
			}
			return nil
		})
		if n, done := overlaps("psql"); done != runners || n == 0 {
			t.Errorf("psql alone: %d of %d migrations finished, %d overlapping pairs; want all finished and overlaps", done, runners, n)
		} else {
			t.Logf("psql alone: %d overlapping pairs of migrations among %d", n, runners)
		}

		// The same migrations under pgadvisory exec.
		env := cliEnv("DATABASE_URL=" + s.DSN)
		concurrently(runners, func(i int) error {
			return sh(append([]string{binary(t), "exec", "4242", "--"}, migrate("exec", i, "0.3")...), env)
		})
		if n, done := overlaps("exec"); done != runners || n != 0 {
			t.Errorf("under exec: %d of %d migrations finished, %d overlapping pairs; want all finished and none", done, runners, n)
		}
	})
}
