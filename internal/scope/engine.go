package scope

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// An Engine is what serves a *sql.DB, as far as advisory locks go: its
// name, its version, and why its session locks or its transaction locks
// cannot be real there, if they cannot. docs/engines.md gives the sources.
type Engine struct {
	Name    string // PostgreSQL, CockroachDB, YugabyteDB, Citus, Supavisor or Neon
	Version string // as the engine gives it, "" when it gives none
	Session string // why session locks are refused; "" where they are real
	Xact    string // why transaction locks are refused; "" where they are real
}

// The engines' names, as [Engine.Name] and [EngineError.Engine] give them.
const (
	PostgreSQL  = "PostgreSQL"
	CockroachDB = "CockroachDB"
	YugabyteDB  = "YugabyteDB"
	Citus       = "Citus"
	Supavisor   = "Supavisor"
	Neon        = "Neon"
)

// ErrUnsupportedEngine is the class of the error a lock call returns on an
// engine where its lock cannot be real. The error is an [*EngineError],
// which names the engine and says why.
var ErrUnsupportedEngine = errors.New("advisory: the server's advisory locks are not real")

// An EngineError refuses a lock on an engine where it cannot be real. It
// matches [ErrUnsupportedEngine] with errors.Is.
type EngineError struct {
	Engine  string // one of the names above
	Version string // as the engine gives it, or ""
	Reason  string // why the lock cannot be real, and what to do instead
}

func (e *EngineError) Error() string {
	name := e.Engine
	if e.Version != "" {
		name += " " + e.Version
	}
	return "advisory: " + name + ": " + e.Reason
}

// Unwrap returns [ErrUnsupportedEngine].
func (e *EngineError) Unwrap() error { return ErrUnsupportedEngine }

// CheckSession refuses a session lock, for operation op on keys, when the
// engine behind conn's *sql.DB cannot make it real. The engine is
// identified once per *sql.DB, by the first call on it, with one round
// trip ([sqltext.EngineProbe]; two on Citus); every later call costs a
// map lookup and sends nothing. A probe that fails is not remembered, and
// its conn is discarded, as after a failed lock statement: a driver may
// have left a cancel in flight that would hit the next statement.
func CheckSession(ctx context.Context, conn *sql.Conn, op, keys string) error {
	if conn == nil {
		return nil // the lock call reports the nil conn itself
	}
	err := checkEngine(ctx, connDB(conn), conn, false, op, keys)
	if err != nil && !errors.Is(err, ErrUnsupportedEngine) {
		Discard(conn)
	}
	return err
}

// CheckXact is [CheckSession] for a transaction lock in tx. A probe runs
// in tx; if it fails, tx has failed, and the caller rolls it back.
func CheckXact(ctx context.Context, tx *sql.Tx, op, keys string) error {
	if tx == nil {
		return nil
	}
	return checkEngine(ctx, txDB(tx), tx, true, op, keys)
}

// CheckDB is [CheckSession] (xact false) or [CheckXact] (xact true) for
// locks that will be taken on connections of db's own, as a Mux takes
// them; a probe runs on one of db's connections.
func CheckDB(ctx context.Context, db *sql.DB, xact bool, op, keys string) error {
	if db == nil {
		return nil
	}
	return checkEngine(ctx, db, db, xact, op, keys)
}

// EngineOf returns the engine behind db, identifying it first with q, one
// of db's connections or transactions or db itself, if no call has yet.
func EngineOf(ctx context.Context, db *sql.DB, q Queryer) (Engine, error) {
	e, err := engineOf(ctx, db, q)
	if err != nil {
		return Engine{}, err
	}
	return *e, nil
}

// A Queryer runs a query that returns one row: *sql.DB, *sql.Conn and
// *sql.Tx are Queryers.
type Queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func checkEngine(ctx context.Context, db *sql.DB, q Queryer, xact bool, op, keys string) error {
	if db == nil {
		// database/sql hid the *sql.DB (see connDBField): nothing to
		// remember the engine under, and a probe per call would cost a
		// round trip each. TestConnDB and TestTxDB fail first.
		return nil
	}
	e, err := engineOf(ctx, db, q)
	if err != nil {
		return Fail(ctx, op, keys, &probeError{err})
	}
	reason := e.Session
	if xact {
		reason = e.Xact
	}
	if reason == "" {
		return nil
	}
	return FailKind(op, keys, &EngineError{Engine: e.Name, Version: e.Version, Reason: reason}, nil)
}

// probeError is a probe that failed; the driver's error stays reachable.
type probeError struct{ err error }

func (e *probeError) Error() string { return "identifying the server's engine: " + e.err.Error() }
func (e *probeError) Unwrap() error { return e.err }

// engines holds the engine of each *sql.DB a probe has identified. It is
// keyed by weak pointers, so that it keeps no *sql.DB alive, and a
// cleanup deletes a *sql.DB's entry once it is collected; a *sql.DB
// allocated later at the same address gets a weak pointer of its own, so
// it never inherits an entry. Reads take no lock of the map's own.
var engines sync.Map // weak.Pointer[sql.DB] → *Engine

// probedMocks holds the sqlmock databases whose engine is probed as on a
// real driver ([ProbeOnMock]).
var probedMocks sync.Map // weak.Pointer[sql.DB] → struct{}

func engineOf(ctx context.Context, db *sql.DB, q Queryer) (*Engine, error) {
	k := weak.Make(db)
	if e, ok := engines.Load(k); ok {
		return e.(*Engine), nil
	}
	if isMock(db) {
		if _, probe := probedMocks.Load(k); !probe {
			return rememberEngine(db, k, &mockEngine), nil
		}
	}
	p, err := probeEngine(ctx, q)
	if err != nil {
		return nil, err
	}
	e := classify(p)
	return rememberEngine(db, k, &e), nil
}

// rememberEngine records e as db's engine, unless a call that raced this one
// did first, and returns the one recorded.
func rememberEngine(db *sql.DB, k weak.Pointer[sql.DB], e *Engine) *Engine {
	v, loaded := engines.LoadOrStore(k, e)
	if !loaded {
		runtime.AddCleanup(db, forgetEngine, k)
	}
	return v.(*Engine)
}

func forgetEngine(k weak.Pointer[sql.DB]) {
	engines.Delete(k)
	probedMocks.Delete(k)
}

// mockDriver is go-sqlmock's package. A *sql.DB on its driver is taken for
// PostgreSQL without a probe, so that tests that expect the statements of
// a lock call, written before the probe existed, still pass; package mock
// asks for the probe with [ProbeOnMock].
const mockDriver = "github.com/DATA-DOG/go-sqlmock"

// mockEngine is the engine of a sqlmock database that is not probed.
var mockEngine = Engine{Name: PostgreSQL}

func isMock(db *sql.DB) bool {
	t := reflect.TypeOf(db.Driver())
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == mockDriver
}

// ProbeOnMock makes the first lock call on db, a sqlmock database, send
// the probe, as on a real driver, so that a test can answer it as an
// engine would. It must be called before that call.
func ProbeOnMock(db *sql.DB) {
	k := weak.Make(db)
	if _, loaded := probedMocks.LoadOrStore(k, struct{}{}); !loaded {
		runtime.AddCleanup(db, forgetEngine, k)
	}
}

// probed is what the probe answered.
type probed struct {
	version, application            string
	ybLocks, ybSilence, neon, citus sql.NullString
	citusGroup                      int64
}

// probeEngine asks q what serves it. An engine that refuses [sqltext.EngineProbe]
// with an error of its own (a SQLSTATE) is asked version() alone; in a
// transaction that cannot work, since the refusal failed it, and the
// refusal is returned.
func probeEngine(ctx context.Context, q Queryer) (probed, error) {
	defer Watch(ctx, q)()
	var p probed
	err := q.QueryRowContext(ctx, sqltext.EngineProbe).
		Scan(&p.version, &p.application, &p.ybLocks, &p.ybSilence, &p.neon, &p.citus)
	if err != nil {
		if SQLState(err) == "" || ctx.Err() != nil {
			return probed{}, err
		}
		p = probed{}
		if q.QueryRowContext(ctx, sqltext.EngineVersion).Scan(&p.version) != nil {
			return probed{}, err
		}
		return p, nil
	}
	if p.citus.Valid {
		if err := q.QueryRowContext(ctx, sqltext.CitusGroup).Scan(&p.citusGroup); err != nil {
			return probed{}, err
		}
	}
	return p, nil
}

// The reasons an engine's locks are refused.
const (
	crdbSession = "its session advisory lock functions are stubs: pg_try_advisory_lock and " +
		"pg_advisory_unlock return true for every caller and lock nothing; use transaction locks " +
		"on CockroachDB 26.3 or later, or a lock table of your own"
	crdbXact = "its transaction advisory lock functions lock nothing before 26.3; " +
		"upgrade to 26.3 or later, or use a lock table of your own"
	ybOff = "advisory locks are off: before 2.25 they are not implemented, and from 2.25 " +
		"the tserver flag ysql_yb_enable_advisory_locks turns them on"
	ybSilenced = "yb_silence_advisory_locks_not_supported_error is on and advisory locks are off: " +
		"each lock function takes the key in the local lock table of the node the session is on, " +
		"which no other node sees; turn on ysql_yb_enable_advisory_locks (2.25 and later)"
	citusWorker = "this node is a Citus worker: advisory locks are per node, so a client of " +
		"another node can take the same key; take locks through the coordinator"
	supavisorSession = "Supavisor pools the server's sessions: in its transaction mode each " +
		"transaction may run on another session, so a session lock excludes no one, and the " +
		"server cannot tell its modes apart; use transaction locks, or connect to the server directly"
)

// The releases in CockroachDB's version(), as in "CockroachDB CCL v26.3.0
// (x86_64-pc-linux-gnu, ...)", and in YugabyteDB's, as in
// "PostgreSQL 15.12-YB-2025.1.0.0-b0 on x86_64-pc-linux-gnu, ...".
var (
	crdbRelease = regexp.MustCompile(`\bv(\d+)\.(\d+)(\.\d+)?`)
	ybRelease   = regexp.MustCompile(`-YB-([0-9.]+)`)
)

// classify tells the engine from what the probe answered.
func classify(p probed) Engine {
	switch {
	case strings.Contains(p.version, "CockroachDB"):
		e := Engine{Name: CockroachDB, Session: crdbSession, Xact: crdbXact}
		if m := crdbRelease.FindStringSubmatch(p.version); m != nil {
			e.Version = m[0]
			major, _ := strconv.Atoi(m[1])
			minor, _ := strconv.Atoi(m[2])
			if major > 26 || major == 26 && minor >= 3 {
				e.Xact = ""
			}
		}
		return e
	case strings.Contains(p.version, "-YB-"):
		e := Engine{Name: YugabyteDB}
		if m := ybRelease.FindStringSubmatch(p.version); m != nil {
			e.Version = m[1]
		}
		switch {
		case settingOn(p.ybLocks):
		case settingOn(p.ybSilence):
			e.Session, e.Xact = ybSilenced, ybSilenced
		default:
			e.Session, e.Xact = ybOff, ybOff
		}
		return e
	case p.citus.Valid:
		e := Engine{Name: Citus, Version: p.citus.String}
		if p.citusGroup != 0 {
			e.Session, e.Xact = citusWorker, citusWorker
		}
		return e
	case strings.HasPrefix(strings.ToLower(p.application), "supavisor"):
		// Supavisor's own release is not known to the server.
		return Engine{Name: Supavisor, Session: supavisorSession}
	case p.neon.Valid && p.neon.String != "":
		return Engine{Name: Neon, Version: pgRelease(p.version)}
	}
	return Engine{Name: PostgreSQL, Version: pgRelease(p.version)}
}

// pgRelease returns the release in PostgreSQL's version(), "17.2" of
// "PostgreSQL 17.2 (Debian 17.2-1) on x86_64-pc-linux-gnu, ...".
func pgRelease(version string) string {
	f := strings.Fields(version)
	if len(f) >= 2 && f[0] == "PostgreSQL" {
		return f[1]
	}
	return ""
}

// settingOn reports a boolean setting that is on, as current_setting shows it.
func settingOn(s sql.NullString) bool {
	switch strings.ToLower(s.String) {
	case "on", "true", "yes", "1":
		return s.Valid
	}
	return false
}
