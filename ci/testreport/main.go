// Command testreport reads the event stream of `go test -json` on stdin,
// writes the plain verbose output (what `go test -v` prints) to the file
// named by its argument, and prints how long the slowest top-level tests
// took, each from its first event to its last. ci/test.sh runs the tests
// through it, so that a slow run says where its time went.
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
	spans, err := read(os.Stdin, log)
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	report(os.Stdout, spans)
}

// read copies the events' output to w and returns the spans of the
// top-level tests. A line that is not an event (the build's own output)
// is copied as it is.
func read(r io.Reader, w io.Writer) ([]*span, error) {
	bw := bufio.NewWriter(w)
	byName := map[string]*span{}
	var spans []*span
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
		if e.Test == "" || e.Time.IsZero() {
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		name := shortPackage(e.Package) + "." + top
		s := byName[name]
		if s == nil {
			s = &span{name: name, first: e.Time}
			byName[name] = s
			spans = append(spans, s)
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
	return spans, bw.Flush()
}

// report prints the slowest spans, longest first.
func report(w io.Writer, spans []*span) {
	slices.SortFunc(spans, func(a, b *span) int {
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
}

// shortPackage drops the module path from a package's import path.
func shortPackage(p string) string {
	return strings.TrimPrefix(p, "github.com/pgadvisory/pgadvisory/")
}
