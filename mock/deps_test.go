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

// TestImporters checks that only sqlxlock imports sqlx and only mock
// imports go-sqlmock, outside test files.
func TestImporters(t *testing.T) {
	t.Parallel()
	allowed := map[string]string{sqlxPath: module + "/sqlxlock", sqlmockPath: module + "/mock"}
	for _, line := range goList(t, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := fields[0]
		for _, imp := range fields[1:] {
			for dep, only := range allowed {
				if isUnder(imp, dep) && pkg != only {
					t.Errorf("%s imports %s; only %s may", pkg, imp, only)
				}
			}
		}
	}
}

// isUnder reports whether import path p is pkg or one of its subpackages.
func isUnder(p, pkg string) bool { return p == pkg || strings.HasPrefix(p, pkg+"/") }
