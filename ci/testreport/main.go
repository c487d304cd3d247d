// Command testreport reads the event stream of `go test -json` on stdin,
// writes the plain verbose output (what `go test -v` prints) to the file
// named by its argument, and prints a report: how long the slowest
// top-level tests took, each from its first event to its last; every
// skipped test with the reason it gave; every failed test; and the totals
// of tests passed, failed and skipped, subtests included. ci/test.sh runs
// the tests through it, so that a run says where its time went and what
// it did not test.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is the part of a test2json event that testreport reads.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Output  string
}

// span is when a top-level test ran, with its parallel subtests: from
// its first event, or from when it went on after a pause, to its last.
type span struct {
	name        string
	first, last time.Time
	failed      bool
}

// outcome is how one test or subtest ended.
type outcome struct {
	name   string // package-relative: "advisory.TestLock/pg15/pq"
	reason string // for a skip, the last line the test logged
}

// result is what read makes of a stream.
type result struct {
	spans   []*span
	passed  int
	failed  []outcome
	skipped []outcome
	// packages whose test binary failed with no failed test of its
	// own: a build failure, a panic, a timeout, a TestMain's exit.
	failedPackages []string
}

// slowest is how many tests the report lists.
const slowest = 15

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testreport LOGFILE")
		os.Exit(2)
	}
	log, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	res, err := read(os.Stdin, log)
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	report(os.Stdout, res)
}

// read copies the events' output to w and returns what the stream
// reports. A line that is not an event (the build's own output) is copied
// as it is.
func read(r io.Reader, w io.Writer) (*result, error) {
	bw := bufio.NewWriter(w)
	res := &result{}
	byName := map[string]*span{}
	lastLine := map[string]string{}  // by test: what it logged last
	failedTests := map[string]bool{} // by package: a test of it failed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			bw.Write(sc.Bytes())
			bw.WriteByte('\n')
			continue
		}
		bw.WriteString(e.Output)
		pkg := shortPackage(e.Package)
		if e.Test == "" {
			if e.Action == "fail" && !failedTests[pkg] {
				res.failedPackages = append(res.failedPackages, pkg)
			}
			continue
		}
		name := pkg + "." + e.Test
		switch e.Action {
		case "output":
			if line := logged(e.Output); line != "" {
				lastLine[name] = line
			}
		case "pass":
			res.passed++
		case "fail":
			res.failed = append(res.failed, outcome{name: name})
			failedTests[pkg] = true
		case "skip":
			res.skipped = append(res.skipped, outcome{name: name, reason: lastLine[name]})
		}
		if e.Time.IsZero() {
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		topName := pkg + "." + top
		s := byName[topName]
		if s == nil {
			s = &span{name: topName, first: e.Time}
			byName[topName] = s
			res.spans = append(res.spans, s)
		}
		if e.Action == "cont" && e.Test == top {
			// A parallel top-level test starts running now.
			s.first = e.Time
		}
		s.last = e.Time
		s.failed = s.failed || e.Action == "fail"
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return res, bw.Flush()
}

// logged returns a line of a test's output that the test itself logged,
// trimmed, or "" for the lines go test adds ("=== RUN", "--- SKIP" and
// the like).
func logged(output string) string {
	line := strings.TrimSpace(output)
	for _, p := range []string{"=== ", "--- "} {
		if strings.HasPrefix(line, p) {
			return ""
		}
	}
	return line
}

// report prints the slowest spans, longest first, the skipped and failed
// tests, and the totals.
func report(w io.Writer, res *result) {
	spans := slices.Clone(res.spans)
	slices.SortStableFunc(spans, func(a, b *span) int {
		return cmp.Compare(b.last.Sub(b.first), a.last.Sub(a.first))
	})
	fmt.Fprintf(w, "slowest tests (first to last event, parallel subtests included):\n")
	for _, s := range spans[:min(slowest, len(spans))] {
		mark := ""
		if s.failed {
			mark = "  FAIL"
		}
		fmt.Fprintf(w, "  %7.1fs  %s%s\n", s.last.Sub(s.first).Seconds(), s.name, mark)
	}
	if len(res.skipped) > 0 {
		fmt.Fprintf(w, "skipped tests:\n")
		for _, o := range res.skipped {
			if o.reason == "" {
				fmt.Fprintf(w, "  %s\n", o.name)
				continue
			}
			fmt.Fprintf(w, "  %s: %s\n", o.name, o.reason)
		}
	}
	if len(res.failed) > 0 {
		fmt.Fprintf(w, "failed tests:\n")
		for _, o := range res.failed {
			fmt.Fprintf(w, "  %s\n", o.name)
		}
	}
	if len(res.failedPackages) > 0 {
		fmt.Fprintf(w, "failed packages with no failed test (a build failure, a panic or a timeout; see the log):\n")
		for _, p := range res.failedPackages {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	fmt.Fprintf(w, "totals, subtests included: %d passed, %d failed, %d skipped\n",
		res.passed, len(res.failed), len(res.skipped))
}

// shortPackage drops the module path from a package's import path.
func shortPackage(p string) string {
	return strings.TrimPrefix(p, "github.com/pgadvisory/pgadvisory/")
}
