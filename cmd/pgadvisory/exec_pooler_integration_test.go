package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestExecPoolerIntegration runs exec through PgBouncer in transaction
// mode with a plain DSN, as a user would give it: pgx's statement cache
// then meets, on a pooled backend, the statements an earlier client
// prepared there (SQLSTATE 42P05), or the lease finds its session shared.
// Either way exec must refuse with the pooler error, exit 69 and not run
// the command, or run it under a lease that held: it never fails with the
// driver's error alone.
func TestExecPoolerIntegration(t *testing.T) {
	const runs = 6
	servers(t, func(t *testing.T, s *pgtest.Server) {
		bouncer := s.PgBouncer(t, 2)
		env := cliEnv("DATABASE_URL=" + bouncer.DSN)
		marker := filepath.Join(t.TempDir(), "ran")
		refused, ran := 0, 0
		for range runs {
			os.Remove(marker)
			r := runCLI(t, env, "exec", "-n", "--heartbeat", "100ms", "9101", "--", "sh", "-c", `touch "$0"`, marker)
			_, err := os.Stat(marker)
			switch {
			case r.code == exitUnavailable && strings.Contains(r.stderr, "the session is shared"):
				refused++
				if err == nil {
					t.Errorf("the command ran although exec refused: %s", r.stderr)
				}
			case r.code == 0 && err == nil:
				ran++
			default:
				t.Errorf("exec through PgBouncer: exit %d, want 69 with the pooler error or 0\nstderr: %s", r.code, r.stderr)
			}
		}
		t.Logf("exec through PgBouncer (pool 2), plain DSN: %d runs: refused with the pooler error %d, ran %d", runs, refused, ran)
	})
}
