package advisory_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyStandardLibrary keeps the core free of drivers and other
// modules: every package advisory depends on is in the standard library or
// is ours.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/pgadvisory/pgadvisory/") {
			t.Errorf("advisory depends on %s, outside the standard library", p)
		}
		if strings.HasPrefix(p, "github.com/pgadvisory/pgadvisory/") && p != "github.com/pgadvisory/pgadvisory/advisory" &&
			!strings.HasPrefix(p, "github.com/pgadvisory/pgadvisory/internal/") {
			t.Errorf("advisory depends on %s; the core imports nothing of ours but internal packages", p)
		}
	}
}
