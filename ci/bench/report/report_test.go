package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRatioGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, group string
		hand        bool
	}{
		{"baseline", "", false},
		{"ours-freshkey", "try-freshkey", false},
		{"observed-fixedkey", "try-fixedkey", false},
		{"query-select-param-freshkey", "try-freshkey", true},
		{"exec-where-inline-fixedkey", "try-fixedkey", true},
		{"lock-freshkey", "lock-freshkey", false},
		{"exec-lock-param-freshkey", "lock-freshkey", true},
		{"ours", "try", false},
		{"ours-wait", "lock", false},
		{"exec-lock-inline", "lock", true},
		{"ours-two", "two", false},
		{"exec-where-param-two", "two", true},
		{"inline-query", "try", true},
		{"params", "try", true},
	}
	for _, tt := range tests {
		if g := ratioGroup(tt.name); g != tt.group {
			t.Errorf("ratioGroup(%q) = %q, want %q", tt.name, g, tt.group)
		}
		if h := isHand(tt.name); h != tt.hand {
			t.Errorf("isHand(%q) = %v, want %v", tt.name, h, tt.hand)
		}
	}
}

func TestBestRatios(t *testing.T) {
	t.Parallel()
	runs := []map[string]float64{
		{"ours-freshkey": 110, "exec-where-inline-freshkey": 100, "query-select-inline-freshkey": 120, "lock-freshkey": 50, "exec-lock-inline-freshkey": 25},
		{"ours-freshkey": 90, "exec-where-inline-freshkey": 100, "query-select-inline-freshkey": 60, "lock-freshkey": 50, "exec-lock-inline-freshkey": 50},
	}
	// query-select-inline has the least median (90 against 100).
	if got, want := bestRatios(runs, "ours-freshkey"), []float64{110.0 / 120, 1.5}; !slices.Equal(got, want) {
		t.Errorf("ours: %v, want %v", got, want)
	}
	if got, want := bestRatios(runs, "lock-freshkey"), []float64{2, 1}; !slices.Equal(got, want) {
		t.Errorf("lock: %v, want %v", got, want)
	}
	if name, _ := fastestHand(runs, "try-freshkey"); name != "query-select-inline-freshkey" {
		t.Errorf("fastest: %s", name)
	}
}

func TestMedianAndSpread(t *testing.T) {
	t.Parallel()
	tests := []struct {
		xs     []float64
		median float64
		spread string
	}{
		{nil, 0, "—"},
		{[]float64{2}, 2, "2.000"},
		{[]float64{3, 1, 2}, 2, "2.000 (1.000–3.000)"},
		{[]float64{4, 1, 2, 3}, 2.5, "2.500 (1.000–4.000)"},
	}
	for _, tt := range tests {
		if m := median(tt.xs); m != tt.median {
			t.Errorf("median(%v) = %v, want %v", tt.xs, m, tt.median)
		}
		if s := spread(tt.xs); s != tt.spread {
			t.Errorf("spread(%v) = %q, want %q", tt.xs, s, tt.spread)
		}
	}
}

func TestReadBench(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "out.txt")
	out := "pkg: example.com/p\n" +
		"BenchmarkInterleavedTryLock/pg15/pq-2   \t 1000\t 8220515 ns/op\t 179905 baseline-ns/call\t 1.088 lock-fixedkey/best\t 754 allocs/op\n" +
		"--- BENCH: BenchmarkInterleavedTryLock/pg15/pq-2\n" +
		"    bench_forms_test.go:102: order: shuffled per op, seed 7\n" +
		"BenchmarkInterleavedTryLock/pg15/pq-2   \t 1000\t 8000000 ns/op\t 170000 baseline-ns/call\n"
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := readBench(path)
	if err != nil {
		t.Fatal(err)
	}
	ss := f["example.com/p"]["InterleavedTryLock/pg15/pq"]
	if len(ss) != 2 || ss[0]["baseline-ns/call"] != 179905 || ss[0]["lock-fixedkey/best"] != 1.088 || ss[1]["ns/op"] != 8e6 {
		t.Errorf("samples: %v", ss)
	}
}

func TestSortGroups(t *testing.T) {
	t.Parallel()
	gs := []string{"pg17/pgx", "pg15/pgx", "pg15/pq-binary", "pg15/pq", "pg17/pq"}
	sortGroups(gs)
	if got := strings.Join(gs, " "); got != "pg15/pq pg15/pq-binary pg15/pgx pg17/pq pg17/pgx" {
		t.Errorf("sorted: %s", got)
	}
}

// TestPgx reads pgxlock's benchmark output as go test -v writes it: the
// logged tables with the messages that introduce them, and the metrics
// the targets are made from.
func TestPgx(t *testing.T) {
	t.Parallel()
	out := `goos: linux
pkg: github.com/pgadvisory/pgadvisory/pgxlock
BenchmarkCallsVsHand/pg15/TryXactLock-2         	       1	 9000 ns/op	         1.021 pgxlock/hand-same	         2.000 pgxlock-allocs-over-hand-same
    calls_bench_test.go:330: pgxlock's statement: ["SELECT 1"]
    calls_bench_test.go:274: pg15 TryXactLock in a pgx.Tx: 7 repeats; load average 0.5 0.4 0.3:
        | variant | per call (p50) |
        |---|---|
        | pgxlock | 80.1 µs |
BenchmarkXactScopeVsHand/pg15-2         	       1	 9000 ns/op	         1.041 pgxlock/BeginFunc-hand-same
BenchmarkXactThroughputVsHand/pg15-2    	       1	 9000 ns/op	         0.990 pgxlock/BeginFunc-hand-same	         0.960 pgxlock/BeginFunc-hand-select
PASS
`
	dir := t.TempDir()
	path := filepath.Join(dir, "pgxlock.txt")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	logs, err := readPgxLogs(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []pgxLog{{"pg15 TryXactLock in a pgx.Tx: 7 repeats; load average 0.5 0.4 0.3",
		"| variant | per call (p50) |\n|---|---|\n| pgxlock | 80.1 µs |\n"}}
	if !slices.Equal(logs, want) {
		t.Errorf("readPgxLogs = %q, want %q", logs, want)
	}
	e := &env{name: "docker", pgxLogs: logs}
	if e.pgx, err = readBench(path); err != nil {
		t.Fatal(err)
	}
	goals := pgxGoalsTable(&results{envs: []*env{e}})
	for _, s := range []string{"docker pg15", "1.021, met", "+2, met", "**1.041, not met**", "**0.960, not met**"} {
		if !strings.Contains(goals, s) {
			t.Errorf("pgxGoalsTable lacks %q:\n%s", s, goals)
		}
	}
}
