package mock_test

import (
	"os/exec"
	"strings"
	"testing"
)

const (
	module      = "github.com/pgadvisory/pgadvisory"
	sqlxPath    = "github.com/jmoiron/sqlx"
	sqlmockPath = "github.com/DATA-DOG/go-sqlmock"
)

// goList runs go list with args and returns its output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-e"}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestLightCore checks that neither the core nor the middleware depends on
// sqlx or go-sqlmock, even indirectly.
func TestLightCore(t *testing.T) {
	t.Parallel()
	for _, p := range goList(t, "-deps", module+"/advisory", module+"/middleware/...") {
		if isUnder(p, sqlxPath) || isUnder(p, sqlmockPath) {
			t.Errorf("advisory or middleware depends on %s", p)
		}
	}
}

// isUnder reports whether import path p is pkg or one of its subpackages.
func isUnder(p, pkg string) bool { return p == pkg || strings.HasPrefix(p, pkg+"/") }
