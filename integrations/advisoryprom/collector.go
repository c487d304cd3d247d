package advisoryprom

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// A Collector is a [prometheus.Collector] of the advisory locks in one
// PostgreSQL database. Each scrape runs one read-only statement on
// pg_catalog.pg_locks and pg_catalog.pg_stat_activity, which takes no
// lock and holds its snapshot only while it runs. It is safe for
// concurrent use; concurrent scrapes run their own queries.
type Collector struct {
	db *sql.DB
	o  options

	up, locks, oldestHold, longestWait, blocked, idleHolders, longestIdle, duration *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// The label values of pgadvisory_locks.
const (
	modeShared    = "shared"
	modeExclusive = "exclusive"
	stateHeld     = "held"
	stateWaiting  = "waiting"
)

// NewCollector returns a collector of the advisory locks in the database
// db connects to. It panics if db is nil or an option is out of range.
func NewCollector(db *sql.DB, opts ...Option) *Collector {
	if db == nil {
		panic("advisoryprom: nil *sql.DB")
	}
	o := options{timeout: defaultTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.timeout <= 0 {
		panic(fmt.Sprintf("advisoryprom: Timeout(%v): must be positive", o.timeout))
	}
	if o.registry == nil {
		// An empty registry still names the library's own namespace.
		o.registry = new(keyspace.Registry)
	}
	ns := []string{"namespace"}
	return &Collector{
		db: db,
		o:  o,
		up: prometheus.NewDesc("pgadvisory_up",
			"1 if the last scrape read the advisory lock state, 0 if its query failed.", nil, nil),
		locks: prometheus.NewDesc("pgadvisory_locks",
			"Advisory locks held or awaited, one per session, key and mode, by namespace, mode (shared, exclusive) and state (held, waiting).",
			[]string{"namespace", "mode", "state"}, nil),
		oldestHold: prometheus.NewDesc("pgadvisory_oldest_hold_seconds",
			"The longest time a session holding an advisory lock of the namespace has been in its current state: PostgreSQL does not record when a lock was granted.",
			ns, nil),
		longestWait: prometheus.NewDesc("pgadvisory_longest_wait_seconds",
			"The longest time a session has waited for an advisory lock of the namespace.", ns, nil),
		blocked: prometheus.NewDesc("pgadvisory_blocked_sessions",
			"Sessions waiting for an advisory lock.", nil, nil),
		idleHolders: prometheus.NewDesc("pgadvisory_idle_holding_sessions",
			"Sessions idle outside a transaction that hold an advisory lock, which is then a session lock: the symptom of a ghost lock.", nil, nil),
		longestIdle: prometheus.NewDesc("pgadvisory_longest_idle_hold_seconds",
			"How long the longest idle of the sessions that pgadvisory_idle_holding_sessions counts has been idle.", nil, nil),
		duration: prometheus.NewDesc("pgadvisory_scrape_duration_seconds",
			"How long the scrape's query took.", nil, nil),
	}
}

// Describe sends the descriptions of every metric the collector reports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.locks, c.oldestHold, c.longestWait, c.blocked, c.idleHolders, c.longestIdle, c.duration} {
		ch <- d
	}
}

// Collect runs the scrape's query and sends its metrics. When the query
// fails it sends pgadvisory_up 0 and the scrape's duration only, and
// passes the error to [OnError].
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.timeout)
	defer cancel()
	start := time.Now()
	groups, err := read(ctx, c.db)
	ch <- prometheus.MustNewConstMetric(c.duration, prometheus.GaugeValue, time.Since(start).Seconds())
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w: %w", ctxErr, err)
		}
		if c.o.onError != nil {
			c.o.onError(fmt.Errorf("advisoryprom: scrape: %w", err))
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	c.send(ch, groups)
}

// series keys pgadvisory_locks.
type series struct{ namespace, mode, state string }

// send turns what a scrape read into metrics.
func (c *Collector) send(ch chan<- prometheus.Metric, groups []group) {
	counts := make(map[series]int64)
	holds := make(map[string]float64)
	waits := make(map[string]float64)
	var blocked, idleHolders int64
	var longestIdle float64
	for _, g := range groups {
		name := c.namespace(g)
		k := series{name, modeExclusive, stateHeld}
		if g.shared {
			k.mode = modeShared
		}
		if !g.granted {
			k.state = stateWaiting
		}
		counts[k] += g.count
		if g.granted && g.maxHold.Valid {
			holds[name] = max(holds[name], g.maxHold.Float64)
		}
		if !g.granted {
			blocked += g.count
			if g.maxWait.Valid {
				waits[name] = max(waits[name], g.maxWait.Float64)
			}
		}
		idleHolders += g.idleHolders
		if g.longestIdle.Valid {
			longestIdle = max(longestIdle, g.longestIdle.Float64)
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.locks, prometheus.GaugeValue, float64(n), k.namespace, k.mode, k.state)
	}
	for name, v := range holds {
		ch <- prometheus.MustNewConstMetric(c.oldestHold, prometheus.GaugeValue, max(v, 0), name)
	}
	for name, v := range waits {
		ch <- prometheus.MustNewConstMetric(c.longestWait, prometheus.GaugeValue, max(v, 0), name)
	}
	ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, float64(blocked))
	ch <- prometheus.MustNewConstMetric(c.idleHolders, prometheus.GaugeValue, float64(idleHolders))
	ch <- prometheus.MustNewConstMetric(c.longestIdle, prometheus.GaugeValue, longestIdle)
}

// namespace returns the label of g's locks: the name of their namespace,
// or "" for bigint keys and pairs whose namespace has no name.
func (c *Collector) namespace(g group) string {
	if g.bigint {
		return ""
	}
	if ns, ok := c.o.registry.Lookup(advisory.PairKey(g.ns, 0)); ok {
		return ns.Name
	}
	return ""
}
