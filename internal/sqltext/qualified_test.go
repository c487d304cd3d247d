package sqltext_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqlcheck"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A variant is one set of arguments a statement builder is called with.
type variant struct {
	form                 sqltext.Form
	xact, shared, second bool // second: fencing, or a slice's second try
	keys                 []sqltext.Key
}

// variants returns every combination of form, scope, mode, flag and keys:
// a bigint key, a pair, and several keys of both spaces.
func variants() []variant {
	keySets := [][]sqltext.Key{
		{{Bigint: math.MinInt64}},
		{{Pair: true, A: math.MinInt32, B: -1}},
		{{Bigint: 7}, {Pair: true, A: 1, B: 2}, {Bigint: -3}, {Pair: true, A: 4, B: 5}},
	}
	var vs []variant
	for _, f := range []sqltext.Form{sqltext.Inline, sqltext.Params} {
		for _, keys := range keySets {
			for i := range 8 {
				vs = append(vs, variant{form: f, xact: i&1 != 0, shared: i&2 != 0, second: i&4 != 0, keys: keys})
			}
		}
	}
	return vs
}

// slots returns the keys of v's first key space, as a semaphore's slots
// are.
func (v variant) slots() []sqltext.Key {
	var out []sqltext.Key
	for _, k := range v.keys {
		if k.Pair == v.keys[0].Pair {
			out = append(out, k)
		}
	}
	return out
}

// builders lists every statement the package exports, by its name, with
// how to build it from a variant. A new exported statement gets a line
// here; TestEveryBuilderChecked fails until it has one.
var builders = []struct {
	name  string
	build func(v variant) string
}{
	{"Lock", func(v variant) string { return sqltext.Lock(v.xact, v.shared, v.keys...) }},
	{"TryLock", func(v variant) string { return sqltext.TryLock(v.guard(), v.xact, v.shared, v.keys[0]) }},
	{"TryLockStmt", func(v variant) string {
		return sqltext.TryLockStmt(v.form, v.guard(), v.xact, v.shared, v.keys[0]).Query
	}},
	{"Unlock", func(v variant) string { return sqltext.Unlock(v.shared, v.keys...) }},
	{"UnlockStmt", func(v variant) string { return sqltext.UnlockStmt(v.form, v.shared, v.keys[0]).Query }},
	{"EndScope", func(v variant) string { return sqltext.EndScope(v.shared, v.second, v.keys[0]) }},
	{"UnlockAll", func(variant) string { return sqltext.UnlockAll }},
	{"Holds", func(v variant) string { return sqltext.Holds(4242, v.shared, v.keys[0], 8177) }},
	{"LeaseStart", func(v variant) string { return sqltext.LeaseStart(v.form, v.shared, v.keys[0], v.second).Query }},
	{"CarrierStart", func(variant) string { return sqltext.CarrierStart }},
	{"CarrierTry", func(v variant) string { return sqltext.CarrierTry(4242, 8177, v.shared, v.keys[0]) }},
	{"CarrierTryFenced", func(v variant) string {
		return sqltext.CarrierTryFenced(v.form, 4242, 8177, v.shared, v.keys[0]).Query
	}},
	{"CarrierUnlock", func(v variant) string { return sqltext.CarrierUnlock(4242, 8177, v.shared, v.keys[0]) }},
	{"CarrierUnlockBatch", func(v variant) string {
		shared := make([]bool, len(v.keys))
		for i := range shared {
			shared[i] = v.shared != (i%2 == 1)
		}
		return sqltext.CarrierUnlockBatch(v.form, 4242, 8177, v.keys, shared).Query
	}},
	{"CarrierCount", func(variant) string { return sqltext.CarrierCount(4242, 8177) }},
	{"CarrierAlive", func(variant) string { return sqltext.CarrierAlive(4242, 8177) }},
	{"Alive", func(variant) string { return sqltext.Alive(4242, 8177) }},
	{"CarrierHeld", func(variant) string { return sqltext.CarrierHeld(4242, 8177) }},
	{"CarrierRelease", func(variant) string { return sqltext.CarrierRelease(4242, 8177) }},
	{"CarrierReleaseFrom", func(variant) string { return sqltext.CarrierReleaseFrom(4242, 8177) }},
	{"LeaseEnd", func(v variant) string { return sqltext.LeaseEnd(4242, 8177, v.shared, v.second, v.keys[0]) }},
	{"LeaseEndFrom", func(v variant) string { return sqltext.LeaseEndFrom(4242, 8177, v.shared, v.second, v.keys[0]) }},
	{"LeaseReclaim", func(v variant) string { return sqltext.LeaseReclaim(v.shared, v.keys[0]) }},
	{"LeaseReclaimAt", func(v variant) string { return sqltext.LeaseReclaimAt(4242, v.keys[0], v.second) }},
	{"SlotTry", func(v variant) string { return sqltext.SlotTry(v.form, v.slots()).Query }},
	{"SlotWait", func(v variant) string { return sqltext.SlotWait(v.form, v.slots(), 1000).Query }},
	{"SlotRing", func(v variant) string { return sqltext.SlotRing(v.form, v.keys[0], 3).Query }},
	{"TryAny", func(v variant) string { return sqltext.TryAny(v.form, v.guard(), v.slots()).Query }},
	{"WaitAny", func(v variant) string { return sqltext.WaitAny(v.form, v.guard(), v.slots(), 1000).Query }},
	{"WaitSettings", func(variant) string { return sqltext.WaitSettings }},
	{"SessionSlice", func(v variant) string { return sqltext.SessionSlice(v.guard(), v.shared, 1000, v.keys...) }},
	{"XactSlice", func(v variant) string { return sqltext.XactSlice(v.shared, 1000, v.keys...) }},
	{"InSavepoint", func(v variant) string {
		return sqltext.InSavepoint(v.second, sqltext.SessionSlice(sqltext.Guarded, v.shared, 5, v.keys...))
	}},
	{"RollbackToWaitSavepoint", func(variant) string { return sqltext.RollbackToWaitSavepoint }},
	{"LeaveWaitSavepoint", func(variant) string { return sqltext.LeaveWaitSavepoint }},
	{"InNewTransaction", func(v variant) string {
		return sqltext.InNewTransaction("BEGIN ISOLATION LEVEL REPEATABLE READ", sqltext.XactSlice(v.shared, 5, v.keys...))
	}},
	{"SessionSliceStmt", func(v variant) string {
		return sqltext.SessionSliceStmt(v.form, v.guard(), v.shared, 1000, 0, v.keys[0]).Query
	}},
	{"DirectSliceStmt", func(v variant) string {
		return sqltext.DirectSliceStmt(v.form, v.guard(), v.shared, 1000, v.keys[0]).Query
	}},
	{"HeldHere", func(v variant) string { return sqltext.HeldHere(v.form, v.shared, v.keys[0]).Query }},
	{"GuardedXactSlice", func(v variant) string { return sqltext.GuardedXactSlice(v.guard(), v.shared, 1000, v.keys...) }},
	{"GuardedXactKeySlice", func(v variant) string {
		return sqltext.GuardedXactKeySlice(v.guard(), v.shared, 1000, 0, v.keys[0])
	}},
	{"EndRefusedSlice", func(v variant) string {
		return sqltext.EndRefusedSlice(v.second, "BEGIN ISOLATION LEVEL REPEATABLE READ")
	}},
	{"XactSliceStmt", func(v variant) string { return sqltext.XactSliceStmt(v.form, v.shared, 1000, v.keys[0]).Query }},
	{"ClearMark", func(variant) string { return "SELECT " + sqltext.ClearMark }},
	{"ClearStaleMark", func(variant) string { return sqltext.ClearStaleMark }},
	{"CreateSchema", func(variant) string { return sqltext.CreateSchema }},
	{"SchemaExists", func(variant) string { return sqltext.SchemaExists }},
	{"TablesNamed", func(variant) string { return sqltext.TablesNamed }},
	{"CreateFencingSequence", func(variant) string { return sqltext.CreateFencingSequence }},
	{"FencingPrivileges", func(variant) string { return sqltext.FencingPrivileges }},
	{"EngineProbe", func(variant) string { return sqltext.EngineProbe }},
	{"EngineVersion", func(variant) string { return sqltext.EngineVersion }},
	{"CitusGroup", func(variant) string { return sqltext.CitusGroup }},
}

// notStatements lists the package's exported names that are no statement.
var notStatements = []string{
	"Form", "Inline", "Params", "Stmt", "Plain", "Key", "Keyer", "KeyOf", "KeysOf", "KeyFromTag",
	"Schema", "FencingSequence", "LegacyFencingSequence", "WaitSavepoint",
	"Guard", "Guarded", "OwnMark", "StandbyState", "SharedState",
	"HoldsElsewhere", "EndNotHeld", "EndReleased", "EndEnded", "EndTxOpen",
	"SlotBusy", "SlotStandby", "SlotShared",
}

// guard is the guard of v's statements: [sqltext.OwnMark] for the second
// variant of each, [sqltext.Guarded] otherwise.
func (v variant) guard() sqltext.Guard {
	if v.second {
		return sqltext.OwnMark(8177)
	}
	return sqltext.Guarded
}

// TestStatementsQualified fails when a statement the package builds names
// a function, relation or cast type without its schema, which the
// session's search_path could then redirect.
func TestStatementsQualified(t *testing.T) {
	t.Parallel()
	vs := variants()
	for _, b := range builders {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			seen := make(map[string]bool)
			for _, v := range vs {
				q := b.build(v)
				if seen[q] {
					continue
				}
				seen[q] = true
				if q == "" {
					t.Fatalf("%+v built an empty statement", v)
				}
				if bad := sqlcheck.Unqualified(q); len(bad) > 0 {
					t.Errorf("%s names without a schema: %s", q, strings.Join(bad, ", "))
				}
			}
		})
	}
}

// TestEveryBuilderChecked fails when the package exports a name that is
// neither in builders nor in notStatements, so that a new statement
// cannot escape TestStatementsQualified.
func TestEveryBuilderChecked(t *testing.T) {
	t.Parallel()
	known := slices.Clone(notStatements)
	for _, b := range builders {
		known = append(known, b.name)
	}
	for _, name := range exportedNames(t) {
		if !slices.Contains(known, name) {
			t.Errorf("sqltext exports %s: add it to builders in qualified_test.go (or to notStatements)", name)
		}
	}
}

// exportedNames returns the package-level exported names of the package's
// source files, tests excepted.
func exportedNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					}
				}
			}
		}
	}
	return names
}
