package main

import (
	"fmt"
	"strings"
)

// sequentialTable renders advisory's sequential benchmark bench
// ("TryLock") in e on its last server: a row per variant, a column per
// driver, each cell the round trips and allocations of one call.
func sequentialTable(e *env, bench string) string {
	byDriver := map[string]map[string]sample{} // driver -> variant -> sample
	server := ""
	for name, samples := range e.sequential[advisoryPkg] {
		parts := strings.Split(name, "/")
		if len(parts) != 4 || parts[0] != bench || len(samples) == 0 {
			continue
		}
		server = max(server, parts[1])
	}
	if server == "" {
		return "_Not run._\n"
	}
	set := map[string]bool{}
	for name, samples := range e.sequential[advisoryPkg] {
		parts := strings.Split(name, "/")
		if len(parts) != 4 || parts[0] != bench || parts[1] != server || len(samples) == 0 {
			continue
		}
		if byDriver[parts[2]] == nil {
			byDriver[parts[2]] = map[string]sample{}
		}
		byDriver[parts[2]][parts[3]] = samples[len(samples)-1]
		set[parts[3]] = true
	}
	drivers := sortedKeys(byDriver)
	sortGroups(drivers)
	variants := sortedKeys(set)
	sortVariants(variants)
	var rows [][]string
	for _, v := range variants {
		row := []string{"`" + v + "`"}
		for _, d := range drivers {
			s, ok := byDriver[d][v]
			if !ok {
				row = append(row, "")
				continue
			}
			row = append(row, fmt.Sprintf("%g rt, %g allocs", s["roundtrips/op"], s["allocs/op"]))
		}
		rows = append(rows, row)
	}
	return fmt.Sprintf("On %s, round trips and allocations per op:\n\n", server) + table(append([]string{"call"}, drivers...), rows)
}

// sortVariants orders variants as the interleaved tables do.
func sortVariants(vs []string) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && variantRank(vs[j]) < variantRank(vs[j-1]); j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

// allocGoal returns the library's allocations per op of bench's variant
// ours on driver, on the last server of the sequential run, and those of
// the form by hand named hand.
func allocGoal(e *env, bench, ours, hand, driver string) (lib, byHand float64, ok bool) {
	server := ""
	for name := range e.sequential[advisoryPkg] {
		parts := strings.Split(name, "/")
		if len(parts) == 4 && parts[0] == bench {
			server = max(server, parts[1])
		}
	}
	prefix := bench + "/" + server + "/" + driver + "/"
	o, h := e.sequential[advisoryPkg][prefix+ours], e.sequential[advisoryPkg][prefix+hand]
	if len(o) == 0 || len(h) == 0 {
		return 0, 0, false
	}
	return o[len(o)-1]["allocs/op"], h[len(h)-1]["allocs/op"], true
}

// overheadTable renders BenchmarkOverhead of advisory and httplock: per
// call, the time and allocations by hand and the library's, medians over
// the runs, on a driver that answers at once.
func overheadTable(r *results) string {
	type pair struct{ pkg, call, hand, ours string }
	pairs := []pair{
		{advisoryPkg, "TryLock + Unlock", "Overhead/TryLock+Unlock/hand", "Overhead/TryLock+Unlock/ours"},
		{advisoryPkg, "TryXactLock", "Overhead/TryXactLock/hand", "Overhead/TryXactLock/ours"},
		{advisoryPkg, "WithXactLock(Try())", "Overhead/WithXactLock/hand", "Overhead/WithXactLock/ours"},
		{"github.com/pgadvisory/pgadvisory/middleware/httplock", "a request through httplock.XactLock", "Overhead/hand", "Overhead/middleware"},
	}
	med := func(ss []sample, unit string) float64 {
		var xs []float64
		for _, s := range ss {
			xs = append(xs, s[unit])
		}
		return median(xs)
	}
	var rows [][]string
	for _, p := range pairs {
		h, o := r.overhead[p.pkg][p.hand], r.overhead[p.pkg][p.ours]
		if len(h) == 0 || len(o) == 0 {
			continue
		}
		hn, on := med(h, "ns/op"), med(o, "ns/op")
		rows = append(rows, []string{p.call,
			fmt.Sprintf("%.0f ns", hn), fmt.Sprintf("%.0f ns", on), fmt.Sprintf("%+.0f ns", on-hn),
			fmt.Sprintf("%g → %g", med(h, "allocs/op"), med(o, "allocs/op")),
			fmt.Sprintf("%g → %g", med(h, "B/op"), med(o, "B/op")),
		})
	}
	if len(rows) == 0 {
		return "_Not run._\n"
	}
	return table([]string{"call", "by hand", "library", "library − by hand", "allocs/op, by hand → library", "B/op, by hand → library"}, rows)
}

// comparePkg is ci/bench's package.
const comparePkg = "github.com/pgadvisory/pgadvisory/ci/bench"

// genericTable renders the benchmarks of ci/bench in e whose names begin
// with prefix as they reported them: a row per benchmark, a column per
// metric (ns/op left out: most of them run once and report their own).
func genericTable(e *env, prefix string) string {
	units := map[string]bool{}
	var names []string
	for name, ss := range e.compare[comparePkg] {
		if !strings.HasPrefix(name, prefix) || len(ss) == 0 {
			continue
		}
		names = append(names, name)
		for u := range ss[len(ss)-1] {
			if u != "ns/op" {
				units[u] = true
			}
		}
	}
	if len(names) == 0 {
		return "_Not run._\n"
	}
	sortGroups(names)
	us := sortedKeys(units)
	var rows [][]string
	for _, n := range names {
		ss := e.compare[comparePkg][n]
		s := ss[len(ss)-1]
		row := []string{"`" + n + "`"}
		for _, u := range us {
			if v, ok := s[u]; ok {
				row = append(row, fmt.Sprintf("%.4g", v))
			} else {
				row = append(row, "")
			}
		}
		rows = append(rows, row)
	}
	return table(append([]string{"benchmark"}, us...), rows)
}
