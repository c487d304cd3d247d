package advisoryprom_test

import (
	"bytes"
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// metricNames are the names of every metric a Collector reports.
var metricNames = []string{
	"pgadvisory_up", "pgadvisory_locks", "pgadvisory_oldest_hold_seconds", "pgadvisory_longest_wait_seconds",
	"pgadvisory_blocked_sessions", "pgadvisory_idle_holding_sessions", "pgadvisory_longest_idle_hold_seconds",
	"pgadvisory_scrape_duration_seconds",
}

// scrape collects c once, as the text exposition format, and parses it
// back: what a Prometheus server would read.
func scrape(t *testing.T, c prometheus.Collector) exposition {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	// GatherAndFormat keeps only the names it is given.
	text, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain, metricNames...)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", text, err)
	}
	return exposition{fams: fams, text: string(text)}
}

// exposition is one parsed scrape.
type exposition struct {
	fams map[string]*dto.MetricFamily
	text string
}

// value returns the value of the series name{labels}, with labels written
// as "k=v" pairs, and whether the scrape has it.
func (e exposition) value(name string, labels ...string) (float64, bool) {
	f := e.fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		want := slices.Clone(labels)
		slices.Sort(got)
		slices.Sort(want)
		if slices.Equal(got, want) {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// series returns how many series the scrape has of name.
func (e exposition) series(name string) int {
	return len(e.fams[name].GetMetric())
}

// names returns the metric names of the scrape, sorted.
func (e exposition) names() []string {
	var out []string
	for n := range e.fams {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (e exposition) String() string { return strings.TrimSpace(e.text) }

// waitFor takes a session lock (shared if shared) on conn in a goroutine,
// which waits for it. At t's cleanup a wait still going is cancelled, and
// the goroutine has ended before the test does.
func waitFor(t *testing.T, conn *sql.Conn, key advisory.Key, shared bool) {
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if shared {
			_ = advisory.LockShared(ctx, conn, key)
		} else {
			_ = advisory.Lock(ctx, conn, key)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
}
