package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A sample is one result line of a benchmark: its metrics by unit.
type sample map[string]float64

// benchFile is a file of go test -bench output: every result line's
// metrics, by package and benchmark name (without "Benchmark" and the
// GOMAXPROCS suffix), in the order of the lines.
type benchFile map[string]map[string][]sample

// resultLine is a result line of go test -bench.
var resultLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+(\d+)\s+(.+)$`)

// readBench reads a file of go test -bench output. A missing file is
// empty.
func readBench(path string) (benchFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return benchFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := benchFile{}
	pkg := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p
			continue
		}
		m := resultLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		s := sample{}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			s[fields[i+1]] = v
		}
		if out[pkg] == nil {
			out[pkg] = map[string][]sample{}
		}
		out[pkg][m[1]] = append(out[pkg][m[1]], s)
	}
	return out, sc.Err()
}

// figures are what ci/bench recorded (PGADVISORY_BENCH_DATA): by
// benchmark, group and variant, every repeat's figure; and every server's
// version().
type figures struct {
	Figures map[string]map[string]map[string][]float64 `json:"figures"`
	Servers map[string]string                          `json:"servers"`
}

// readFigures reads a data.json of ci/bench. A missing file is empty.
func readFigures(path string) (figures, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return figures{}, nil
	}
	if err != nil {
		return figures{}, err
	}
	var f figures
	err = json.Unmarshal(b, &f)
	return f, err
}

// readMeta reads meta.txt: "key: value" lines.
func readMeta(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

// readLoad reads load.txt, "unix-time load1 load5 load15" every 10 s, and
// returns the 1-minute load averages.
func readLoad(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// env is what one environment's run left: ci/bench's figures, the
// output of advisory's interleaved and sequential benchmarks, and that of
// pgxlock's benchmarks against pgx by hand with the tables they logged.
type env struct {
	name        string
	figures     figures
	compare     benchFile // ci/bench's output
	interleaved benchFile
	sequential  benchFile
	pgx         benchFile
	pgxLogs     []pgxLog
}

// results are everything the suite left in its results directory.
type results struct {
	meta     map[string]string
	load     []float64
	envs     []*env
	overhead benchFile
}

// readResults reads the results directory dir.
func readResults(dir string) (*results, error) {
	meta, err := readMeta(filepath.Join(dir, "meta.txt"))
	if err != nil {
		return nil, err
	}
	r := &results{meta: meta}
	if r.load, err = readLoad(filepath.Join(dir, "load.txt")); err != nil {
		return nil, err
	}
	if r.overhead, err = readBench(filepath.Join(dir, "overhead.txt")); err != nil {
		return nil, err
	}
	for _, name := range strings.Fields(meta["environments"]) {
		e := &env{name: name}
		d := filepath.Join(dir, name)
		if e.figures, err = readFigures(filepath.Join(d, "data.json")); err != nil {
			return nil, err
		}
		if e.compare, err = readBench(filepath.Join(d, "compare.txt")); err != nil {
			return nil, err
		}
		if e.interleaved, err = readBench(filepath.Join(d, "advisory.txt")); err != nil {
			return nil, err
		}
		if e.sequential, err = readBench(filepath.Join(d, "sequential.txt")); err != nil {
			return nil, err
		}
		if e.pgx, err = readBench(filepath.Join(d, "pgxlock.txt")); err != nil {
			return nil, err
		}
		if e.pgxLogs, err = readPgxLogs(filepath.Join(d, "pgxlock.txt")); err != nil {
			return nil, err
		}
		r.envs = append(r.envs, e)
	}
	return r, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
