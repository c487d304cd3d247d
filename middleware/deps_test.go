package middleware_test

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
// or one of the module's internal packages that advisory itself imports.
func TestImportsOnlyStandardLibraryAndAdvisory(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	allowed := map[string]bool{module + "middleware": true}
	for _, p := range nonStandardDeps(t, module+"advisory") {
		if p == module+"advisory" || strings.HasPrefix(p, module+"internal/") {
			allowed[p] = true
		}
	}
	for _, p := range nonStandardDeps(t, ".") {
		if !allowed[p] {
			t.Errorf("middleware depends on %s, which is neither the standard library nor advisory", p)
		}
	}
}
