// Command report renders docs/benchmarks.md from one run of the suite
// (bash ci/bench.sh): the prose of a template kept beside it, and the
// tables it makes from the results directory the run left, so that no
// figure on the page is written by hand.
//
//	go run ./report -results ../../bench-results -template report/benchmarks.md.tmpl -out ../../docs/benchmarks.md
//
// The template is a text/template whose functions render the tables; see
// funcs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

func main() {
	dir := flag.String("results", "../../bench-results", "the results directory ci/bench.sh wrote")
	tmpl := flag.String("template", "report/benchmarks.md.tmpl", "the page's template")
	out := flag.String("out", "../../docs/benchmarks.md", "the page to write")
	root := flag.String("root", "../..", "the repository's root, whose modules the versions are read from")
	flag.Parse()
	if err := run(*dir, *tmpl, *out, *root); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(dir, tmplPath, out, root string) error {
	r, err := readResults(dir)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(tmplPath)
	if err != nil {
		return err
	}
	t, err := template.New(filepath.Base(tmplPath)).Funcs(funcs(r, root)).Parse(string(src))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, nil); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}

// funcs are the template's functions. Those that take an environment
// ("docker", "local") render "_Not run._" for one the run left out.
func funcs(r *results, root string) template.FuncMap {
	envOf := func(name string) *env {
		for _, e := range r.envs {
			if e.name == name {
				return e
			}
		}
		return &env{name: name}
	}
	return template.FuncMap{
		"meta":        func(k string) string { return r.meta[k] },
		"load":        func() string { return loadText(r) },
		"versions":    func() string { return versionsTable(r, root) },
		"goals":       func() string { return goalsTable(r) },
		"interleaved": func(bench, e string) string { return interleavedTable(envOf(e), bench) },
		"form":        func(e string) string { return formTable(envOf(e)) },
		"sequential":  func(bench, e string) string { return sequentialTable(envOf(e), bench) },
		"overhead":    func() string { return overheadTable(r) },
		"handoff":     func(e string) string { return handoffTable(envOf(e)) },
		"throughput":  func(e string) string { return throughputTables(envOf(e)) },
		"middleware":  func(e string) string { return middlewareTable(envOf(e)) },
		"waitorder":   func(e string) string { return waitOrderTable(envOf(e)) },
		"generic":     func(prefix, e string) string { return genericTable(envOf(e), prefix) },
		"pgxgoals":    func() string { return pgxGoalsTable(r) },
		"pgx":         func(e string) string { return pgxTables(envOf(e)) },
	}
}

// loadText describes the load average over the run.
func loadText(r *results) string {
	if len(r.load) == 0 {
		return "not recorded"
	}
	return fmt.Sprintf("median %.1f, from %.1f to %.1f (the 1-minute load average, %d readings 10 s apart, on %s CPUs)",
		median(r.load), slices.Min(r.load), slices.Max(r.load), len(r.load), r.meta["cpus"])
}

// modules are the modules whose versions the page names, by the module
// that requires them: the root's (advisory's benchmarks) and ci/bench's.
var modules = []struct{ dir, path string }{
	{".", "github.com/jackc/pgx/v5"},
	{".", "github.com/lib/pq"},
	{"ci/bench", "github.com/jackc/pgx/v5"},
	{"ci/bench", "github.com/lib/pq"},
	{"ci/bench", "github.com/go-redsync/redsync/v4"},
	{"ci/bench", "github.com/redis/go-redis/v9"},
}

// versionsTable renders what the run used: Go, the servers, the drivers
// and clients from the module graph, and the machine.
func versionsTable(r *results, root string) string {
	rows := [][]string{{"Go", r.meta["go"]}}
	for _, e := range r.envs {
		for _, name := range sortedKeys(e.figures.Servers) {
			v, _, _ := strings.Cut(e.figures.Servers[name], " on ")
			rows = append(rows, []string{fmt.Sprintf("PostgreSQL, %s (%s)", name, e.name), v})
		}
	}
	for _, m := range modules {
		v, err := moduleVersion(filepath.Join(root, m.dir), m.path)
		if err != nil {
			v = "unknown: " + err.Error()
		}
		rows = append(rows, []string{fmt.Sprintf("%s (module %s)", m.path, m.dir), v})
	}
	for _, c := range [][]string{{"redis-server", "--version"}, {"pgbench", "--version"}} {
		if b, err := exec.Command(c[0], c[1]).Output(); err == nil {
			rows = append(rows, []string{c[0], strings.TrimSpace(string(b))})
		}
	}
	for _, k := range []string{"docker", "kernel", "cpu", "cpus", "memory"} {
		rows = append(rows, []string{k, r.meta[k]})
	}
	return table([]string{"what", "version"}, rows)
}

// moduleVersion returns the version of module path in the module graph of
// the module in dir.
func moduleVersion(dir, path string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// goalsTable renders the targets the suite is held to, with the median
// of every server and driver of every environment against each.
func goalsTable(r *results) string {
	type col struct {
		e     *env
		group string
	}
	var cols []col
	header := []string{"target"}
	for _, e := range r.envs {
		var groups []string
		for g := range interleavedRuns(e, "InterleavedTryLock") {
			if !strings.HasSuffix(g, "/pq-binary") {
				groups = append(groups, g)
			}
		}
		sortGroups(groups)
		for _, g := range groups {
			cols = append(cols, col{e, g})
			header = append(header, e.name+" "+g)
		}
	}
	if len(cols) == 0 {
		return "_Not run._\n"
	}
	lockCall := func(bench, variant string) func(c col) string {
		return func(c col) string {
			return mark(median(bestRatios(interleavedRuns(c.e, bench)[c.group], variant)), 1.03, true)
		}
	}
	middleware := func(bench string) func(c col) string {
		return func(c col) string {
			vs := c.e.figures.Figures[bench][c.group]
			best, _ := bestOf(vs, handForms, false)
			return mark(median(ratios(vs["middleware"], best)), 1.03, true)
		}
	}
	handoffBest := func(variant string) func(c col) string {
		return func(c col) string {
			vs := c.e.figures.Figures["handoff"][c.group]
			if len(vs[variant]) == 0 {
				return "—"
			}
			best, _ := bestOf(vs, []string{"raw", "raw-param"}, false)
			return mark(median(ratios(vs[variant], best)), 1.05, true)
		}
	}
	throughputBest := func(c col) string {
		vs := c.e.figures.Figures["throughput"][c.group]
		best, _ := bestOf(vs, handForms, true)
		return mark(median(ratios(vs["library"], best)), 0.97, false)
	}
	// allocs compares the library's allocations with those of the fastest
	// form by hand of the interleaved benchmark, counted by the sequential
	// one in the first environment, which has them.
	allocs := func(bench, ours string) func(c col) string {
		return func(c col) string {
			_, driver, _ := strings.Cut(c.group, "/")
			hand, _ := fastestHand(interleavedRuns(c.e, "Interleaved"+bench)[c.group], ratioGroup(ours))
			seq := c.e
			if len(r.envs) > 0 {
				seq = r.envs[0]
			}
			lib, byHand, ok := allocGoal(seq, bench, ours, hand, driver)
			if !ok {
				return "—"
			}
			s := fmt.Sprintf("%g vs %g (`%s`)", lib, byHand, hand)
			if lib-byHand > 2 {
				return "**" + s + ", not met**"
			}
			return s + ", met"
		}
	}
	return targetsTable(header, cols, []target[col]{
		{"`TryLock`+`Unlock`, fresh keys ≤ 1.03× the best by hand", lockCall("InterleavedTryLock", "ours-freshkey")},
		{"`TryLock`+`Unlock`, one key ≤ 1.03×", lockCall("InterleavedTryLock", "ours-fixedkey")},
		{"`TryXactLock`, fresh keys ≤ 1.03×", lockCall("InterleavedTryXactLock", "ours-freshkey")},
		{"`TryXactLock`, one key ≤ 1.03×", lockCall("InterleavedTryXactLock", "ours-fixedkey")},
		{"`WithXactLock(Try())` ≤ 1.03×", lockCall("InterleavedWithXactLock", "ours")},
		{"allocations, `TryLock`+`Unlock`, fresh keys: library vs the fastest by hand, ≤ 2 more", allocs("TryLock", "ours-freshkey")},
		{"allocations, `TryXactLock`, fresh keys, ≤ 2 more", allocs("TryXactLock", "ours-freshkey")},
		{"8-client throughput ≥ 0.97× the best by hand", throughputBest},
		{"handoff p50 ≤ 1.05× the best by hand (`Unlock`, then `Lock`'s wait)", handoffBest("library")},
		{"the same, `library-waiter`: the library's wait, released by the faster unlock by hand", handoffBest("library-waiter")},
		{"middleware, one client (mean request) ≤ 1.03×", middleware("middleware-1")},
		{"middleware, 8 clients ≤ 1.03×", middleware("middleware-8")},
	})
}
