// Package compilecheck builds small Go files against the module, for the
// tests that prove an API refuses a misuse at compile time, such as an
// option given to a call it cannot apply to.
//
// A [Suite] is built with one go build: each statement is the body of a
// function of its own in one file, which an overlay places in a package
// that exists only for the build, beside the test's own package. Every
// misplaced statement must fail with a type error on its own lines, and
// no other line may fail.
package compilecheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A Suite is the statements one test builds.
type Suite struct {
	// Imports are the import paths the statements use. Each must be used
	// by Params or by a placed statement.
	Imports []string
	// Params declares the variables the statements use, as a parameter
	// list, such as "ctx context.Context, db *sql.DB".
	Params string
	// Misplaced are statements, by name, each of which must fail to
	// compile with a type error ("cannot use", "does not implement").
	Misplaced map[string]string
	// Placed are statements, by name, each of which must compile.
	Placed map[string]string
}

// span is the lines of the file that one statement takes.
type span struct{ first, last int }

// errLine matches a compiler error in the generated file.
var errLine = regexp.MustCompile(`(?m)compilecheck\.go:(\d+):\d+: (.*)$`)

// Run builds s and reports, in a subtest per statement named
// "Misplaced/<name>" or "Placed/<name>", whether each statement failed
// or compiled as it must.
func (s Suite) Run(t *testing.T) {
	t.Helper()
	src, spans := s.source()
	out, err := build(t, src)
	errs := map[int][]string{} // by line
	for _, m := range errLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		errs[n] = append(errs[n], m[2])
	}
	owner := func(line int) string {
		for name, sp := range spans {
			if sp.first <= line && line <= sp.last {
				return name
			}
		}
		return ""
	}
	for line, msgs := range errs {
		if name := owner(line); !strings.HasPrefix(name, "Misplaced/") {
			t.Fatalf("line %d of the generated file, outside any misplaced statement, fails: %s\n%s", line, strings.Join(msgs, "; "), numbered(src))
		}
	}
	if err != nil && len(errs) == 0 {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range slices.Sorted(maps.Keys(spans)) {
		sp := spans[name]
		var msgs []string
		for line := sp.first; line <= sp.last; line++ {
			msgs = append(msgs, errs[line]...)
		}
		t.Run(name, func(t *testing.T) {
			stmt := s.Placed[strings.TrimPrefix(name, "Placed/")]
			if m, ok := strings.CutPrefix(name, "Misplaced/"); ok {
				stmt = s.Misplaced[m]
				switch {
				case len(msgs) == 0:
					t.Errorf("%s compiles; want a type error", stmt)
				case !slices.ContainsFunc(msgs, isTypeError):
					t.Errorf("%s: not a type error: %s", stmt, strings.Join(msgs, "; "))
				}
				return
			}
			if len(msgs) > 0 {
				t.Errorf("%s does not compile: %s", stmt, strings.Join(msgs, "; "))
			}
		})
	}
}

// isTypeError reports whether msg says that a value is of the wrong type.
func isTypeError(msg string) bool {
	return strings.Contains(msg, "does not implement") || strings.Contains(msg, "cannot use")
}

// source returns the file that holds s's statements, and the lines each
// takes, by subtest name.
func (s Suite) source() (string, map[string]span) {
	var b strings.Builder
	b.WriteString("package compilecheck\n\nimport (\n")
	for _, imp := range s.Imports {
		fmt.Fprintf(&b, "\t%q\n", imp)
	}
	b.WriteString(")\n")
	line := strings.Count(b.String(), "\n") + 1 // the line b's next byte goes on
	spans := map[string]span{}
	i := 0
	add := func(kind string, stmts map[string]string) {
		for _, name := range slices.Sorted(maps.Keys(stmts)) {
			stmt := stmts[name]
			fmt.Fprintf(&b, "\nfunc f%d(%s) {\n", i, s.Params)
			line += 2
			spans[kind+"/"+name] = span{line, line + strings.Count(stmt, "\n")}
			b.WriteString(stmt)
			b.WriteString("\n}\n")
			line += strings.Count(stmt, "\n") + 2
			i++
		}
	}
	add("Misplaced", s.Misplaced)
	add("Placed", s.Placed)
	return b.String(), spans
}

// build compiles src as a package of its own, beside the test's package
// directory, and returns the go command's output and error.
func build(t *testing.T, src string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "compilecheck.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// A package that does not exist in the tree, made of the file.
	pkgDir := filepath.Join(wd, "compilecheck_overlay")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkgDir, "compilecheck.go"): file}})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	// -e reports every error, not the first ten.
	cmd := exec.Command("go", "build", "-overlay", ov, "-gcflags=-e", "-o", os.DevNull, "./compilecheck_overlay")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// numbered returns src with line numbers, for failure messages.
func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}
