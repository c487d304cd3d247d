package advisoryprom_test

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgadvisory/pgadvisory/integrations/advisoryprom"
)

// failingDriver is a database/sql driver whose every connection fails, so
// that a scrape's query fails without a server.
type failingDriver struct{}

var errNoServer = errors.New("no server here")

func (failingDriver) Open(string) (driver.Conn, error) { return nil, errNoServer }

func init() { sql.Register("advisoryprom-failing", failingDriver{}) }

// TestCollectorScrapeError checks that a scrape whose query fails reports
// pgadvisory_up 0 and its duration, no lock metrics, and hands the error
// to OnError, wrapped so that errors.Is still finds the driver's.
func TestCollectorScrapeError(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("advisoryprom-failing", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var (
		mu   sync.Mutex
		errs []error
	)
	c := advisoryprom.NewCollector(db, advisoryprom.OnError(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}))
	got := scrape(t, c)
	if v, ok := got.value("pgadvisory_up"); !ok || v != 0 {
		t.Errorf("pgadvisory_up = %v (present %v), want 0", v, ok)
	}
	if _, ok := got.value("pgadvisory_scrape_duration_seconds"); !ok {
		t.Error("no pgadvisory_scrape_duration_seconds")
	}
	if names := got.names(); len(names) != 2 {
		t.Errorf("a failed scrape reports %v, want only pgadvisory_scrape_duration_seconds and pgadvisory_up", names)
	}
	mu.Lock()
	heard := errs
	mu.Unlock()
	if len(heard) != 1 || !errors.Is(heard[0], errNoServer) || !strings.HasPrefix(heard[0].Error(), "advisoryprom: ") {
		t.Errorf("OnError heard %v, want one advisoryprom error matching %v", heard, errNoServer)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestCollectorBadConfiguration checks that NewCollector panics, naming
// the package, on a nil *sql.DB and on a timeout that is not positive.
func TestCollectorBadConfiguration(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("advisoryprom-failing", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		name string
		new  func()
	}{
		{"NilDB", func() { advisoryprom.NewCollector(nil) }},
		{"ZeroTimeout", func() { advisoryprom.NewCollector(db, advisoryprom.Timeout(0)) }},
		{"NegativeTimeout", func() { advisoryprom.NewCollector(db, advisoryprom.Timeout(-time.Second)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "advisoryprom: ") {
					t.Errorf("panic %v, want one that names advisoryprom", r)
				}
			}()
			tc.new()
		})
	}
}
