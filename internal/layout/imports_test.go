package layout_test

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/pgadvisory/pgadvisory"

// The rules below name packages relative to the module, as "advisory". A name
// ending in "/..." matches every package below it, and only those.

// light lists the packages that must stay light, and which of the module's
// packages each may depend on, directly or through another package. Nothing
// outside the standard library and the module is allowed, so an internal
// package that pulls in a driver or grpc breaks the rule for every light
// package that imports it. A package listed here need not exist yet.
var light = map[string][]string{
	// The core imports nothing of ours but internal packages.
	"advisory": {"internal/..."},
	// Monitoring and the key dictionary are built on the core; monitoring
	// names namespaces from the dictionary.
	"advisory/inspect":  {"advisory", "advisory/keyspace", "internal/..."},
	"advisory/keyspace": {"advisory", "internal/..."},
	// The coordination recipes are built on leases; the idempotency
	// helper on the core alone.
	"advisory/leader":      {"advisory", "internal/..."},
	"advisory/semaphore":   {"advisory", "internal/..."},
	"advisory/idempotency": {"advisory", "internal/..."},
	// The net/http middleware needs nothing but the core, and the
	// idempotency helper its Idempotent middleware is built on, and the code
	// the transports share.
	"middleware/httplock": {"advisory", "advisory/idempotency", "internal/...", "middleware/internal/..."},
}

// mustExist lists the light packages whose absence means the check saw too
// little.
var mustExist = []string{"advisory", "middleware/httplock"}

// owners maps each third-party dependency (and every package below it) to
// the packages that may import it. Each dependency exists for the package that
// wraps it. The library imports no driver: only the test harness and the
// example programs, which are programs like a user's, do. A third-party import
// that no entry covers is an error: a new dependency is added here, on
// purpose. A new owner is one more pattern in its entry; a command under
// cmd/ that opens its own connections, for example, adds "cmd/..." to the
// drivers'.
var owners = map[string][]string{
	"google.golang.org/grpc":         {"middleware/grpclock"},
	"google.golang.org/genproto":     {"middleware/grpclock"},
	"google.golang.org/protobuf":     {"middleware/grpclock"},
	"github.com/jmoiron/sqlx":        {"sqlxlock"},
	"github.com/DATA-DOG/go-sqlmock": {"mock"},
	"github.com/lib/pq":              {"pgtest", "examples/..."},
	"github.com/jackc/pgx/v5":        {"pgtest", "pgxlock", "examples/...", "cmd/..."},
	"github.com/ory/dockertest/v3":   {"pgtest"},
}

// transports are the packages that carry a lock across a protocol. None may
// depend on another, directly or through another package. The code they
// share, under middleware/internal, is not a transport.
var transports = []string{"middleware/..."}

// transportShared holds the transports' shared code, which every transport
// may import.
var transportShared = []string{"middleware/internal/..."}

// nobodyImports lists the packages no package may import: programs.
var nobodyImports = []string{"cmd/...", "examples/..."}

// pkg is one package of the build, from go list.
type pkg struct {
	standard bool
	imports  []string
	err      string
}

// listPackages lists the module's packages and everything they depend on,
// with their imports outside test files.
func listPackages(t *testing.T) map[string]*pkg {
	t.Helper()
	// The go command is always there when tests run: its failure is a
	// failure, not a skip.
	cmd := exec.Command("go", "list", "-e", "-deps",
		"-f", "{{.ImportPath}}\t{{.Standard}}\t{{join .Imports \" \"}}\t{{with .Error}}{{.Err}}{{end}}",
		module+"/...")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	pkgs := make(map[string]*pkg)
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 4 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		pkgs[f[0]] = &pkg{standard: f[1] == "true", imports: strings.Fields(f[2]), err: f[3]}
	}
	return pkgs
}

// ours returns p relative to the module, and whether it is the module's.
func ours(p string) (string, bool) {
	if rel, ok := strings.CutPrefix(p, module+"/"); ok {
		return rel, true
	}
	return "", p == module
}

// match reports whether the module-relative package rel matches pattern.
func match(pattern, rel string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return strings.HasPrefix(rel, dir+"/")
	}
	return rel == pattern
}

// matchAny reports whether rel matches one of patterns.
func matchAny(patterns []string, rel string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, rel) })
}

// deps returns every package that p depends on, p excluded, sorted.
func deps(pkgs map[string]*pkg, p string) []string {
	seen := make(map[string]bool)
	var walk func(string)
	walk = func(q string) {
		info := pkgs[q]
		if info == nil {
			return
		}
		for _, imp := range info.imports {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(p)
	out := make([]string, 0, len(seen))
	for q := range seen {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// path returns a chain of imports from p to dep, for messages.
func path(pkgs map[string]*pkg, p, dep string) string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		if q == dep {
			var chain []string
			for ; q != ""; q = prev[q] {
				rel, ok := ours(q)
				if !ok {
					rel = q
				}
				chain = append(chain, rel)
			}
			slices.Reverse(chain)
			return strings.Join(chain, " → ")
		}
		if info := pkgs[q]; info != nil {
			for _, imp := range info.imports {
				if _, ok := prev[imp]; !ok {
					prev[imp] = q
					queue = append(queue, imp)
				}
			}
		}
	}
	return dep
}

// owner returns the entry of owners that covers the third-party import imp.
func owner(imp string) (string, bool) {
	best := ""
	for dep := range owners {
		if (imp == dep || strings.HasPrefix(imp, dep+"/")) && len(dep) > len(best) {
			best = dep
		}
	}
	return best, best != ""
}

// violations checks pkgs, the module's packages and everything they depend
// on, against the rules, and returns what breaks each rule, by rule name.
func violations(pkgs map[string]*pkg) map[string][]string {
	v := make(map[string][]string)
	add := func(rule, format string, args ...any) {
		v[rule] = append(v[rule], fmt.Sprintf(format, args...))
	}
	// standard reports whether p is in the standard library; "C" is cgo's.
	standard := func(p string) bool {
		info := pkgs[p]
		return p == "C" || info != nil && info.standard
	}

	var mine []string
	for p := range pkgs {
		if _, ok := ours(p); ok {
			mine = append(mine, p)
		}
	}
	sort.Strings(mine)

	for _, rel := range mustExist {
		if pkgs[module+"/"+rel] == nil {
			add("Light", "package %s is missing; the rule for it checks nothing", rel)
		}
	}
	for _, p := range mine {
		rel, _ := ours(p)

		if allowed, ok := light[rel]; ok {
			for _, d := range deps(pkgs, p) {
				if standard(d) {
					continue
				}
				drel, mineDep := ours(d)
				switch {
				case !mineDep:
					add("Light", "%s depends on %s, outside the standard library: %s", rel, d, path(pkgs, p, d))
				case drel != rel && !matchAny(allowed, drel):
					add("Light", "%s depends on %s; it may depend only on %v: %s", rel, drel, allowed, path(pkgs, p, d))
				}
			}
		}

		for _, imp := range pkgs[p].imports {
			irel, mineImp := ours(imp)
			switch {
			case standard(imp):
			case mineImp:
				if matchAny(nobodyImports, irel) {
					add("Programs", "%s imports %s; nothing may import a program", rel, irel)
				}
			default:
				dep, ok := owner(imp)
				if !ok {
					add("Owners", "%s imports %s, which has no entry in owners; add one naming the packages that may import it", rel, imp)
				} else if !matchAny(owners[dep], rel) {
					add("Owners", "%s imports %s; only %v may", rel, imp, owners[dep])
				}
			}
		}

		if matchAny(transports, rel) && !matchAny(transportShared, rel) {
			for _, d := range deps(pkgs, p) {
				if drel, ok := ours(d); ok && drel != rel && matchAny(transports, drel) && !matchAny(transportShared, drel) {
					add("Transports", "transport %s depends on transport %s: %s", rel, drel, path(pkgs, p, d))
				}
			}
		}
	}
	return v
}

// rules are the names violations files its findings under.
var rules = []string{"Light", "Owners", "Transports", "Programs"}

// TestImports keeps the module's import rules, for every package's code
// outside test files (tests may import drivers, sqlmock and the harness):
//
//   - Light: the light packages depend only on the standard library and the
//     module's packages their rule allows;
//   - Owners: each third-party dependency is imported only by the packages
//     that own it, and every third-party import has an owner;
//   - Transports: the transports never depend on each other;
//   - Programs: nothing imports a program.
func TestImports(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	n := 0
	for p, info := range pkgs {
		if _, ok := ours(p); ok {
			n++
			if info.err != "" {
				t.Errorf("go list %s: %s", p, info.err)
			}
		}
	}
	if n < 8 {
		t.Fatalf("go list found only %d packages of the module; the check saw too little", n)
	}
	v := violations(pkgs)
	for _, rule := range rules {
		t.Run(rule, func(t *testing.T) {
			for _, msg := range v[rule] {
				t.Error(msg)
			}
		})
	}
}

// TestImportsCatch checks that each rule catches what it exists to catch,
// on made-up import graphs.
func TestImportsCatch(t *testing.T) {
	t.Parallel()
	m := func(rel string) string { return module + "/" + rel }
	// base is a tidy module: each entry is a package and its imports.
	base := map[string][]string{
		m("advisory"):                    {"context", m("internal/sqltext")},
		m("internal/sqltext"):            {"strings"},
		m("middleware/internal/reqlock"): {m("advisory")},
		m("pgtest"):                      {"github.com/lib/pq", "github.com/jackc/pgx/v5/stdlib"},
		m("middleware/httplock"):         {"net/http", m("advisory"), m("middleware/internal/reqlock")},
		m("middleware/grpclock"):         {m("advisory"), "google.golang.org/grpc"},
		m("sqlxlock"):                    {m("advisory"), "github.com/jmoiron/sqlx"},
		m("mock"):                        {"github.com/DATA-DOG/go-sqlmock"},
		m("examples/workers"):            {m("advisory"), m("pgtest"), "github.com/lib/pq"},
		"github.com/lib/pq":              {"net"},
		"github.com/jmoiron/sqlx":        {"database/sql"},
		"google.golang.org/grpc":         {"net"},
		"github.com/DATA-DOG/go-sqlmock": {"database/sql"},
		"github.com/jackc/pgx/v5/stdlib": {"database/sql"},
	}
	tests := []struct {
		name string
		edit map[string][]string // packages to add or replace
		want map[string]string   // rule → a part of one of its messages; other rules must not fire
	}{
		{name: "Tidy"},
		{
			name: "CoreImportsADriver",
			edit: map[string][]string{m("advisory"): {"github.com/lib/pq"}},
			want: map[string]string{
				"Light":  "advisory depends on github.com/lib/pq",
				"Owners": "advisory imports github.com/lib/pq; only [pgtest examples/...] may",
			},
		},
		{
			name: "CoreReachesADriverThroughInternal",
			edit: map[string][]string{m("internal/sqltext"): {m("pgtest")}},
			want: map[string]string{"Light": "advisory → internal/sqltext → pgtest → github.com/lib/pq"},
		},
		{
			name: "CoreImportsATransport",
			edit: map[string][]string{m("advisory"): {m("middleware/httplock")}},
			want: map[string]string{
				"Light":      "advisory depends on middleware/httplock",
				"Transports": "middleware/grpclock → advisory → middleware/httplock",
			},
		},
		{
			name: "HTTPImportsSqlxlock",
			edit: map[string][]string{m("middleware/httplock"): {m("sqlxlock")}},
			want: map[string]string{"Light": "middleware/httplock depends on sqlxlock"},
		},
		{
			name: "InspectImportsMock",
			edit: map[string][]string{m("advisory/inspect"): {m("advisory"), m("mock")}},
			want: map[string]string{"Light": "advisory/inspect depends on mock"},
		},
		{
			name: "GRPCOutsideGrpclock",
			edit: map[string][]string{m("sqlxlock"): {"google.golang.org/grpc/status"}},
			want: map[string]string{"Owners": "sqlxlock imports google.golang.org/grpc/status"},
		},
		{
			name: "DriverInMock",
			edit: map[string][]string{m("mock"): {"github.com/jackc/pgx/v5/stdlib"}},
			want: map[string]string{"Owners": "mock imports github.com/jackc/pgx/v5/stdlib"},
		},
		{
			name: "UnknownDependency",
			edit: map[string][]string{m("sqlxlock"): {"example.com/left-pad"}},
			want: map[string]string{"Owners": "no entry in owners"},
		},
		{
			name: "TransportImportsTransport",
			edit: map[string][]string{m("middleware/grpclock"): {m("middleware/httplock")}},
			want: map[string]string{"Transports": "transport middleware/grpclock depends on transport middleware/httplock"},
		},
		{
			name: "TransportReachesTransportThroughInternal",
			edit: map[string][]string{
				m("middleware/grpclock"): {m("internal/bridge")},
				m("internal/bridge"):     {m("middleware/httplock")},
			},
			want: map[string]string{"Transports": "middleware/grpclock → internal/bridge → middleware/httplock"},
		},
		{
			name: "ImportsAProgram",
			edit: map[string][]string{m("sqlxlock"): {m("cmd/pgadvisory")}, m("cmd/pgadvisory"): nil},
			want: map[string]string{"Programs": "sqlxlock imports cmd/pgadvisory"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			graph := maps.Clone(base)
			maps.Copy(graph, tt.edit)
			pkgs := make(map[string]*pkg)
			for p, imps := range graph {
				pkgs[p] = &pkg{imports: imps}
			}
			// An import not in the graph is a standard package if its
			// first element has no dot, and a third-party one otherwise.
			for _, imps := range graph {
				for _, imp := range imps {
					if pkgs[imp] == nil {
						first, _, _ := strings.Cut(imp, "/")
						pkgs[imp] = &pkg{standard: !strings.Contains(first, ".")}
					}
				}
			}
			v := violations(pkgs)
			for _, rule := range rules {
				msgs := v[rule]
				want, ok := tt.want[rule]
				if !ok {
					if len(msgs) > 0 {
						t.Errorf("rule %s fired: %q", rule, msgs)
					}
					continue
				}
				if !slices.ContainsFunc(msgs, func(s string) bool { return strings.Contains(s, want) }) {
					t.Errorf("rule %s: got %q, want a message containing %q", rule, msgs, want)
				}
			}
		})
	}
}

// TestMatch checks the pattern rules the import rules are written in.
func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, rel string
		want         bool
	}{
		{"advisory", "advisory", true},
		{"advisory", "advisory/inspect", false},
		{"advisory", "advisoryx", false},
		{"internal/...", "internal/pgtest", true},
		{"internal/...", "internal/sqltext/sub", true},
		{"internal/...", "internal", false},
		{"internal/...", "internalx/pgtest", false},
		{"internal/...", "pgtest", false},
		{"examples/...", "examples/workers", true},
	}
	for _, tt := range tests {
		if got := match(tt.pattern, tt.rel); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.rel, got, tt.want)
		}
	}
}
