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
// engine behind conn cannot make it real.
//
// The engine is known per driver connection, the session conn's Raw
// hands out: the first lock call on a connection identifies it with one
// round trip ([sqltext.EngineProbe]; two on Citus), and every later call
// on that connection, through any *sql.Conn, costs a Raw call and a map
// lookup and sends nothing. database/sql gives no way to ask a *sql.Conn
// for the *sql.DB it came from, so each of a pool's connections is
// identified on its own, once in its life; that is also right for a DSN
// that names several hosts. A probe that fails is not remembered, and
// its conn is discarded, as after a failed lock statement: a driver may
// have left a cancel in flight that would hit the next statement.
func CheckSession(ctx context.Context, conn *sql.Conn, op, keys string) error {
	return checkSession(ctx, SQLConn(conn), op, keys)
}

// checkSession is [CheckSession] on s, a session of any front end, which
// knows its engine ([Querier.Engine]). A probe that fails discards s.
func checkSession(ctx context.Context, s Session, op, keys string) error {
	if s == nil {
		return nil // the lock call reports the nil session itself
	}
	e, err := s.Engine(ctx)
	if e == nil && err == nil {
		return nil // s has ended: the lock statement fails itself
	}
	err = check(ctx, e, err, false, op, keys)
	if err != nil && !errors.Is(err, ErrUnsupportedEngine) {
		s.Discard()
	}
	return err
}

// CheckXact is [CheckSession] for a transaction lock in tx. A probe runs
// in tx; if it fails, tx has failed, and the caller rolls it back. See
// [sqlTx.Engine] for a tx whose driver connection cannot be found.
func CheckXact(ctx context.Context, tx *sql.Tx, op, keys string) error {
	return checkXact(ctx, SQLTx(tx), op, keys)
}

// checkXact is [CheckXact] on tx, a transaction of any front end.
func checkXact(ctx context.Context, tx Tx, op, keys string) error {
	if tx == nil {
		return nil
	}
	e, err := tx.Engine(ctx)
	if e == nil && err == nil {
		return nil
	}
	return check(ctx, e, err, true, op, keys)
}

// CheckDB is [CheckSession] (xact false) or [CheckXact] (xact true) for
// locks that will be taken on connections of db's own, as a Mux takes
// them, before it has one. db's engine is known once per *sql.DB: the
// first check takes one of db's connections and asks it as CheckSession
// does (a connection already identified sends nothing); every later
// check costs a map lookup.
func CheckDB(ctx context.Context, db *sql.DB, xact bool, op, keys string) error {
	if db == nil {
		return nil
	}
	return checkPool(ctx, dbSource{db}, xact, op, keys)
}

// EngineOf returns the engine behind db, identifying it first through q,
// one of db's connections or transactions or db itself, if no
// [CheckDB] or EngineOf call on db has yet.
func EngineOf(ctx context.Context, db *sql.DB, q Queryer) (Engine, error) {
	e, err := engineOfDB(ctx, db, q)
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

// check refuses a session (xact false) or transaction lock on e, or
// reports the probe's failure.
func check(ctx context.Context, e *Engine, err error, xact bool, op, keys string) error {
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

// connEngines holds the engine of each driver connection a probe has
// identified, and dbEngines that of each *sql.DB a [CheckDB] or
// [EngineOf] has. Both are keyed by weak pointers, so that they keep
// nothing alive, and a cleanup deletes an entry once its connection or
// *sql.DB is collected; one allocated later at the same address gets a
// weak pointer of its own, so it never inherits an entry. Reads take no
// lock of the maps' own.
var (
	connEngines weakMap[byte]   // a driver connection → *Engine
	dbEngines   weakMap[sql.DB] // → *Engine
)

// probedMocks holds the sqlmock databases, and their driver connection,
// whose engine is probed as on a real driver ([ProbeOnMock]).
var (
	probedMocks     weakMap[sql.DB]
	probedMockConns weakMap[byte]
)

// A driverConn is what the engine's cache knows of a driver connection:
// the object it points to, as a pointer to its first byte (nil when it is
// not a pointer), and its type. It is taken inside Raw, and keeps nothing
// of the connection's for use outside.
type driverConn struct {
	p *byte
	t reflect.Type
}

// driverConnOf returns what the cache knows of dc. The pointer is dc's
// own value, not a field of it.
func driverConnOf(dc any) driverConn {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().Size() == 0 {
		return driverConn{t: reflect.TypeOf(dc)}
	}
	return driverConn{p: (*byte)(v.UnsafePointer()), t: v.Type()}
}

// identify returns conn's driver connection, as Raw hands it out, or
// false when conn is closed.
func identify(conn *sql.Conn) (driverConn, bool) {
	var dc driverConn
	err := conn.Raw(func(c any) error {
		dc = driverConnOf(c)
		return nil
	})
	return dc, err == nil
}

// engineOfConn returns the engine behind dc, identifying it first with q,
// the [SQLConn] or [SQLTx] of a *sql.Conn or *sql.Tx on it. A driver
// connection that is not a pointer cannot be remembered, and is probed on
// every call; the drivers known to database/sql's users all have pointers.
func engineOfConn(ctx context.Context, dc driverConn, q Querier) (*Engine, error) {
	p := dc.p
	if p != nil {
		if e, ok := connEngines.load(p); ok {
			return e.(*Engine), nil
		}
		if isMockType(dc.t) {
			if _, probe := probedMockConns.load(p); !probe {
				return connEngines.store(p, &mockEngine).(*Engine), nil
			}
		}
	}
	e, err := IdentifyEngine(ctx, q)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return &e, nil
	}
	return connEngines.store(p, &e).(*Engine), nil
}

// engineOfDB returns the engine behind db, identifying it first through q:
// a *sql.Conn or *sql.Tx is asked as [CheckSession] and [CheckXact] ask
// them, and db itself lends one of its connections.
func engineOfDB(ctx context.Context, db *sql.DB, q Queryer) (*Engine, error) {
	if e, ok := dbEngines.load(db); ok {
		return e.(*Engine), nil
	}
	if isMock(db.Driver()) {
		if _, probe := probedMocks.load(db); !probe {
			return dbEngines.store(db, &mockEngine).(*Engine), nil
		}
	}
	var e *Engine
	var err error
	switch q := q.(type) {
	case *sql.Tx:
		e, err = engineOfConn(ctx, driverConnOf(txDriverConn(q)), SQLTx(q))
	case *sql.Conn:
		e, err = engineOfSession(ctx, q)
	default:
		return probeDB(ctx, db)
	}
	if err != nil {
		return nil, err
	}
	return dbEngines.store(db, e).(*Engine), nil
}

// A dbProbe is the probe of a *sql.DB under way: done is closed once e
// or err is set.
type dbProbe struct {
	done chan struct{}
	e    *Engine
	err  error
}

// dbProbes holds the probe under way of each *sql.DB: see probeDB.
var dbProbes sync.Map // *sql.DB → *dbProbe

// probeDB finds db's engine on a connection of its own, one probe at a
// time per *sql.DB, and records it in dbEngines. The probe runs on its
// own, bounded by OutlivedTimeout and not by ctx: a call whose ctx ends
// first fails, and the probe goes on for the next. So calls that each
// give up before a connection can be made, as on a loaded server, cannot
// keep db's engine unknown for ever, nor send one connection attempt
// each.
func probeDB(ctx context.Context, db *sql.DB) (*Engine, error) {
	p := &dbProbe{done: make(chan struct{})}
	if v, running := dbProbes.LoadOrStore(db, p); running {
		p = v.(*dbProbe)
	} else {
		go func() {
			pctx, cancel := outlived(ctx)
			defer cancel()
			p.e, p.err = probeDBOnce(pctx, db)
			if p.err == nil {
				p.e = dbEngines.store(db, p.e).(*Engine)
			}
			dbProbes.Delete(db) // after a failure, the next call probes again
			close(p.done)
		}()
	}
	select {
	case <-p.done:
		return p.e, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// probeDBOnce finds db's engine on one of its connections.
func probeDBOnce(ctx context.Context, db *sql.DB) (*Engine, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return engineOfSession(ctx, conn)
}

// engineOfSession is [engineOfConn] on conn's driver connection. A probe
// that fails discards conn, as [CheckSession] does.
func engineOfSession(ctx context.Context, conn *sql.Conn) (*Engine, error) {
	dc, ok := identify(conn)
	if !ok {
		return nil, sql.ErrConnDone
	}
	e, err := engineOfConn(ctx, dc, SQLConn(conn))
	if err != nil {
		Discard(conn)
	}
	return e, err
}

// A weakMap maps objects of type T to values, keeping no object alive: an
// entry is deleted once its object is collected.
type weakMap[T any] struct{ m sync.Map } // weak.Pointer[T] → any

func (w *weakMap[T]) load(p *T) (any, bool) { return w.m.Load(weak.Make(p)) }

// store records v for p, unless a call that raced this one did first,
// and returns the value recorded.
func (w *weakMap[T]) store(p *T, v any) any {
	k := weak.Make(p)
	got, loaded := w.m.LoadOrStore(k, v)
	if !loaded {
		runtime.AddCleanup(p, w.forget, k)
	}
	return got
}

func (w *weakMap[T]) forget(k weak.Pointer[T]) { w.m.Delete(k) }

// mockDriver is go-sqlmock's package. A *sql.DB on its driver, and a
// connection of it, is taken for PostgreSQL without a probe, so that
// tests that expect the statements of a lock call, written before the
// probe existed, still pass; package mock asks for the probe with
// [ProbeOnMock].
const mockDriver = "github.com/DATA-DOG/go-sqlmock"

// mockEngine is the engine of a sqlmock database that is not probed.
var mockEngine = Engine{Name: PostgreSQL}

// isMock reports whether v, a driver or a driver's connection, is
// sqlmock's.
func isMock(v any) bool { return isMockType(reflect.TypeOf(v)) }

// isMockType reports whether t, or the type t points to, is sqlmock's.
func isMockType(t reflect.Type) bool {
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == mockDriver
}

// ProbeOnMock makes the first lock call on db, a sqlmock database, send
// the probe, as on a real driver, so that a test can answer it as an
// engine would. It must be called before that call. sqlmock serves all
// of a database's sessions with one driver connection, which is marked
// too.
func ProbeOnMock(db *sql.DB) {
	probedMocks.store(db, struct{}{})
	conn, err := db.Conn(context.Background())
	if err != nil {
		return
	}
	defer conn.Close()
	if dc, ok := identify(conn); ok && dc.p != nil {
		probedMockConns.store(dc.p, struct{}{})
	}
}

// probed is what the probe answered.
type probed struct {
	version, application            string
	ybLocks, ybSilence, neon, citus sql.NullString
	citusGroup                      int64
}

// IdentifyEngine asks q which engine serves its session, with one round
// trip ([sqltext.EngineProbe]; two on Citus). A front end's
// [Querier.Engine] calls it once per server session and remembers the
// answer.
func IdentifyEngine(ctx context.Context, q Querier) (Engine, error) {
	p, err := probeEngine(ctx, q)
	if err != nil {
		return Engine{}, err
	}
	return classify(p), nil
}

// probeEngine asks q what serves it. An engine that refuses [sqltext.EngineProbe]
// with an error of its own (a SQLSTATE) is asked version() alone; in a
// transaction that cannot work, since the refusal failed it, and the
// refusal is returned.
func probeEngine(ctx context.Context, q Querier) (probed, error) {
	var p probed
	err := q.QueryRow(ctx, sqltext.EngineProbe).
		Scan(&p.version, &p.application, &p.ybLocks, &p.ybSilence, &p.neon, &p.citus)
	if err != nil {
		if SQLState(err) == "" || ctx.Err() != nil {
			return probed{}, err
		}
		p = probed{}
		if q.QueryRow(ctx, sqltext.EngineVersion).Scan(&p.version) != nil {
			return probed{}, err
		}
		return p, nil
	}
	if p.citus.Valid {
		if err := q.QueryRow(ctx, sqltext.CitusGroup).Scan(&p.citusGroup); err != nil {
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
