package main

import (
	"bytes"
	"strings"
	"testing"
)

// stream is what `go test -json` prints for a package with a passing
// test, a passing and a skipped subtest, a failing test and a test
// skipped without a reason, followed by a package whose binary failed
// with no failed test, as a panic in TestMain makes it.
const stream = `{"Time":"2026-12-02T05:46:02.769Z","Action":"start","Package":"github.com/pgadvisory/pgadvisory/x"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"run","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"run","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Sub"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Sub","Output":"=== RUN   TestA/Sub\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Sub","Output":"    x_test.go:3: noise\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Sub","Output":"    x_test.go:3: no server: PGADVISORY_TEST_DSN unset\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Sub","Output":"--- SKIP: TestA/Sub (0.00s)\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"skip","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Sub","Elapsed":0}
{"Time":"2026-12-02T05:46:02.775Z","Action":"run","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Ok"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Ok","Output":"=== RUN   TestA/Ok\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Ok","Output":"--- PASS: TestA/Ok (0.00s)\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"pass","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA/Ok","Elapsed":0}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"pass","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestA","Elapsed":0}
{"Time":"2026-12-02T05:46:02.775Z","Action":"run","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestB"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestB","Output":"    x_test.go:4: boom\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"fail","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestB","Elapsed":0}
{"Time":"2026-12-02T05:46:02.775Z","Action":"run","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestC"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestC","Output":"--- SKIP: TestC (0.00s)\n"}
{"Time":"2026-12-02T05:46:02.775Z","Action":"skip","Package":"github.com/pgadvisory/pgadvisory/x","Test":"TestC","Elapsed":0}
{"Time":"2026-12-02T05:46:02.776Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/x","Output":"FAIL\tgithub.com/pgadvisory/pgadvisory/x\t0.004s\n"}
{"Time":"2026-12-02T05:46:02.776Z","Action":"fail","Package":"github.com/pgadvisory/pgadvisory/x","Elapsed":0.007}
# github.com/pgadvisory/pgadvisory/y
{"Time":"2026-12-02T05:46:03.000Z","Action":"output","Package":"github.com/pgadvisory/pgadvisory/y","Output":"panic: boom\n"}
{"Time":"2026-12-02T05:46:03.001Z","Action":"fail","Package":"github.com/pgadvisory/pgadvisory/y","Elapsed":0.001}
`

func TestReport(t *testing.T) {
	var log, out bytes.Buffer
	res, err := read(strings.NewReader(stream), &log)
	if err != nil {
		t.Fatal(err)
	}
	report(&out, res)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"LogKeepsTheOutput", log.String(), "    x_test.go:4: boom\n--- FAIL: TestB (0.00s)\n"},
		{"LogKeepsOtherLines", log.String(), "# github.com/pgadvisory/pgadvisory/y\n"},
		{"SkippedWithReason", out.String(), "skipped tests:\n  x.TestA/Sub: x_test.go:3: no server: PGADVISORY_TEST_DSN unset\n  x.TestC\n"},
		{"Failed", out.String(), "failed tests:\n  x.TestB\n"},
		{"FailedPackage", out.String(), "no failed test (a build failure, a panic or a timeout; see the log):\n  y\n"},
		{"Totals", out.String(), "totals, subtests included: 2 passed, 1 failed, 2 skipped\n"},
		{"Slowest", out.String(), "s  x.TestB  FAIL\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.in, tc.want) {
				t.Errorf("missing %q in:\n%s", tc.want, tc.in)
			}
		})
	}
}
