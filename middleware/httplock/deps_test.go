package httplock_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/pgadvisory/pgadvisory/"

// nonStandardDeps lists the packages outside the standard library that pkg
// depends on, pkg included.
func nonStandardDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestImportsOnlyStandardLibraryAndAdvisory keeps the middleware light:
// every package it depends on is in the standard library, or is advisory
// (with what advisory depends on), or is one of the module's internal
// packages that itself depends on nothing else. The go command is always
// there when tests run, so its absence is a failure, not a skip.
func TestImportsOnlyStandardLibraryAndAdvisory(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{module + "middleware/httplock": true}
	for _, p := range nonStandardDeps(t, module+"advisory") {
		allowed[p] = true
	}
	checked := 0
	for _, p := range nonStandardDeps(t, ".") {
		checked++
		if allowed[p] {
			continue
		}
		if !strings.HasPrefix(p, module+"internal/") {
			t.Errorf("middleware depends on %s, which is neither the standard library nor advisory", p)
			continue
		}
		for _, q := range nonStandardDeps(t, p) {
			if q != p && !allowed[q] {
				t.Errorf("middleware depends on %s, which depends on %s: neither the standard library nor advisory", p, q)
			}
		}
	}
	if checked < 2 {
		t.Fatalf("go list found %d packages besides the standard library; the check saw too little", checked)
	}
}
