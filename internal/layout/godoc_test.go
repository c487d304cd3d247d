package layout_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestGoDocShowsOnlyPublicNames checks that go doc of each public package
// names no internal package in its declarations: no exported constant,
// variable, type or function is written in terms of one (as
// "var ErrX = scope.ErrX" or "type T = scope.T" would be), since a reader
// of go doc, or of pkg.go.dev, cannot follow such a name.
func TestGoDocShowsOnlyPublicNames(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc on every public package")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var public []string
	internal := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, name, _ := strings.Cut(line, " ")
		switch {
		case strings.Contains(pkg+"/", "/internal/"):
			internal[pkg[strings.LastIndex(pkg, "/")+1:]] = true
		case name != "main":
			public = append(public, pkg)
		}
	}
	names := make([]string, 0, len(internal))
	for n := range internal {
		names = append(names, regexp.QuoteMeta(n))
	}
	used := regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\.[A-Za-z_]`)
	for _, pkg := range public {
		doc, err := exec.Command("go", "doc", "-all", pkg).Output()
		if err != nil {
			t.Errorf("go doc -all %s: %v", pkg, err)
			continue
		}
		for i, line := range strings.Split(string(doc), "\n") {
			// Doc text is indented by four spaces; comments in a
			// declaration begin with //.
			code := line
			if strings.HasPrefix(code, "    ") {
				continue
			}
			if c := strings.Index(code, "//"); c >= 0 {
				code = code[:c]
			}
			if m := used.FindString(code); m != "" {
				t.Errorf("go doc %s, line %d, names the internal package %s: %s", strings.TrimPrefix(pkg, module+"/"), i+1, strings.TrimSuffix(m[:len(m)-1], "."), strings.TrimSpace(line))
			}
		}
	}
}
