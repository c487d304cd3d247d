package scope

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// AbortMargin is how long a statement may run on after its context has
// ended before its connection is closed under it, on a driver that does
// not give a statement up by itself (lib/pq). A call that such a
// statement holds up returns within its context's deadline plus
// AbortMargin, and a little more for the driver to see the socket close.
//
// lib/pq answers a context that ends by sending a cancel request and
// then waits for the statement's answer, however long: a backend that
// does not answer (stopped, or behind a network that drops packets) holds
// the call until it answers again. A session whose statement was
// cancelled is one lib/pq drops anyway, so closing its socket loses
// nothing: the statement fails at once, database/sql drops the
// connection, and the server ends the session, and every lock it holds,
// as soon as it reads the close. The margin leaves the cancel request the
// time to end a statement the server is still running, such as a wait.
const AbortMargin = 100 * time.Millisecond

// Watch arms a watchdog over the statements that run on e until the
// returned stop is called: when ctx ends and they have not returned
// within [AbortMargin], it closes the driver's socket under them. e is a
// *sql.Conn, a *sql.Tx, or a driver's connection (as Raw hands it out).
// Watch must not be called on a *sql.Conn inside a Raw callback on the
// same conn, nor while a statement runs on it: it reads the driver's
// connection through Raw. Call stop once the statements have returned.
//
// Only lib/pq's connections are watched: pgx closes its connection
// itself when a context ends during a statement, and a driver Watch does
// not know (or lib/pq behind a wrapper) is left alone. Without a context
// that can end, or on such a driver, Watch costs a type check and
// returns a stop that does nothing; on lib/pq it costs a Raw call and a
// context.AfterFunc, and no goroutine unless ctx ends while a statement
// runs.
func Watch(ctx context.Context, e any) (stop func()) {
	if ctx.Done() == nil {
		return noStop
	}
	return watchSocket(ctx, socketOf(e))
}

// watchSocket is [Watch] on sock, a socket socketOf found, or nil.
func watchSocket(ctx context.Context, sock net.Conn) (stop func()) {
	if sock == nil || ctx.Done() == nil {
		return noStop
	}
	return watch(ctx, sock)
}

// watch arms a watchdog that closes sock when ctx ends and stop has not
// been called within AbortMargin.
func watch(ctx context.Context, sock io.Closer) (stop func()) {
	w := &watchdog{sock: sock}
	unwatch := context.AfterFunc(ctx, w.fire)
	return func() {
		if !unwatch() {
			w.end()
		}
	}
}

// noStop is the stop of a statement nothing watches.
func noStop() {}

// watchdog closes one socket when the statements it watches outlive
// their context's end by AbortMargin.
type watchdog struct {
	sock io.Closer

	mu    sync.Mutex
	ended bool        // the statements returned
	timer *time.Timer // armed when the context ended first
}

// fire runs when the context ends while the statements run: it gives
// them AbortMargin to return.
func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.timer = time.AfterFunc(AbortMargin, w.abort)
	}
}

// abort closes the socket, unless the statements have returned.
func (w *watchdog) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		aborts.Add(1)
		_ = w.sock.Close()
	}
}

// end records that the statements returned, after the context ended.
func (w *watchdog) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// aborts counts the sockets a watchdog closed, for tests.
var aborts atomic.Int64

// Aborts returns how many sockets watchdogs have closed in this process.
func Aborts() int64 { return aborts.Load() }

// socketOf returns the socket under e, a *sql.Conn, a *sql.Tx or a
// driver's connection, when e's driver needs a watchdog, or nil.
func socketOf(e any) net.Conn {
	switch e := e.(type) {
	case *sql.Conn:
		if e == nil {
			return nil
		}
		var sock net.Conn
		_ = e.Raw(func(dc any) error {
			sock = pqSocket(dc)
			return nil
		})
		return sock
	case *sql.Tx:
		return pqSocket(txDriverConn(e))
	default:
		return pqSocket(e)
	}
}

// pqSocket returns the socket of dc when dc is lib/pq's connection, and
// nil otherwise. lib/pq keeps it in the unexported field c, a net.Conn,
// which it sets when it connects and never again; it is read by
// reflection, as advisory imports no driver. A TLS connection's socket is
// the one under it, so that a close cannot wait to write TLS's goodbye to
// a peer that does not read.
func pqSocket(dc any) net.Conn {
	if dc == nil {
		return nil
	}
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	off, ok := pqSocketOffset(v.Type().Elem())
	if !ok {
		return nil
	}
	sock := *(*net.Conn)(unsafe.Add(v.UnsafePointer(), off))
	if t, ok := sock.(interface{ NetConn() net.Conn }); ok {
		sock = t.NetConn()
	}
	return sock
}

// pqSocketOffsets caches, per driver connection type, the offset of lib/pq's
// socket field, or -1 for a type that has none.
var pqSocketOffsets sync.Map // reflect.Type → uintptr or -1

// pqSocketOffset returns the offset of the socket field in t, when t is
// lib/pq's connection type.
func pqSocketOffset(t reflect.Type) (uintptr, bool) {
	if off, ok := pqSocketOffsets.Load(t); ok {
		o := off.(int64)
		return uintptr(o), o >= 0
	}
	off := int64(-1)
	if t.Kind() == reflect.Struct && t.PkgPath() == "github.com/lib/pq" && t.Name() == "conn" {
		if f, ok := t.FieldByName("c"); ok && f.Type == netConnType && len(f.Index) == 1 {
			off = int64(f.Offset)
		}
	}
	pqSocketOffsets.Store(t, off)
	return uintptr(off), off >= 0
}

var netConnType = reflect.TypeFor[net.Conn]()

// txLayout is where database/sql keeps, in a Tx, what txDriverConn reads:
// a Tx has no Raw, so its driver's connection is found by reflection. It
// is read as database/sql's own grabConn reads it: under closemu, once
// done says the transaction has not ended, since Rollback clears dc
// after taking and dropping closemu.
var txLayout = sync.OnceValue(func() (l struct {
	ok                bool
	closemu, done, dc uintptr
	ci                uintptr // in the driverConn that dc points to
	ctx               uintptr // the context the transaction began under
}) {
	tt := reflect.TypeFor[sql.Tx]()
	mu, ok1 := tt.FieldByName("closemu")
	done, ok2 := tt.FieldByName("done")
	dc, ok3 := tt.FieldByName("dc")
	if !ok1 || !ok2 || !ok3 || mu.Type != reflect.TypeFor[sync.RWMutex]() ||
		done.Type != reflect.TypeFor[atomic.Bool]() ||
		dc.Type.Kind() != reflect.Pointer || dc.Type.Elem().Kind() != reflect.Struct ||
		dc.Type.Elem().PkgPath() != "database/sql" || dc.Type.Elem().Name() != "driverConn" {
		return l
	}
	ci, ok := dc.Type.Elem().FieldByName("ci")
	if !ok || ci.Type != reflect.TypeFor[driver.Conn]() || len(ci.Index) != 1 {
		return l
	}
	txCtx, ok := tt.FieldByName("ctx")
	if !ok || txCtx.Type != reflect.TypeFor[context.Context]() {
		return l
	}
	l.ok, l.closemu, l.done, l.dc, l.ci, l.ctx = true, mu.Offset, done.Offset, dc.Offset, ci.Offset, txCtx.Offset
	return l
})

// txDriverConn returns the driver's connection under tx, or nil when tx
// has ended or this Go release lays database/sql out otherwise.
func txDriverConn(tx *sql.Tx) driver.Conn {
	l := txLayout()
	if tx == nil || !l.ok {
		return nil
	}
	base := unsafe.Pointer(tx)
	mu := (*sync.RWMutex)(unsafe.Add(base, l.closemu))
	mu.RLock()
	defer mu.RUnlock()
	if (*atomic.Bool)(unsafe.Add(base, l.done)).Load() {
		return nil
	}
	dc := *(*unsafe.Pointer)(unsafe.Add(base, l.dc))
	if dc == nil {
		return nil
	}
	// ci is set when the connection opens and never again.
	return *(*driver.Conn)(unsafe.Add(dc, l.ci))
}

// BeginTx begins a transaction on p as opts say, as db.BeginTx does,
// and watches its BEGIN as [Run] watches a statement: lib/pq does not
// watch ctx while it sends BEGIN, and a backend that does not answer
// would hold the call however long. On lib/pq the transaction runs on a
// *sql.Conn of its own, so that the watchdog can reach the driver's
// connection before BEGIN is sent; end returns that connection to db,
// and must be called once the transaction has ended. A rollback that
// database/sql began when ctx ended is watched too, from end. Other drivers begin
// on db itself, and end does nothing.
func BeginTx(ctx context.Context, p Pool, opts *sql.TxOptions) (tx *sql.Tx, end func(), err error) {
	if !isPQ(p.DB().Driver()) {
		tx, err = p.BeginTx(ctx, nil, opts)
		return tx, noStop, err
	}
	for try := 1; try <= BadConnTries; try++ {
		var conn *sql.Conn
		if conn, err = p.Conn(ctx); err != nil {
			return nil, nil, err
		}
		sock := socketOf(conn)
		stop := watchSocket(ctx, sock)
		tx, err = p.BeginTx(ctx, conn, opts)
		stop()
		if err == nil {
			// database/sql rolls tx back from a goroutine of its own
			// when ctx ends, and lib/pq's ROLLBACK is not watched: on a
			// server that stopped answering, conn's close would wait for
			// it, so it is watched here as a statement is.
			return tx, func() {
				defer watchSocket(ctx, sock)()
				_ = conn.Close()
			}, nil
		}
		_ = conn.Close()
		// db.BeginTx tries another connection when the driver says the
		// pooled one was dead before it sent anything; so does this.
		if !errors.Is(err, driver.ErrBadConn) {
			break
		}
	}
	return nil, nil, err
}

// isPQ reports whether d is lib/pq's driver.
func isPQ(d driver.Driver) bool {
	t := reflect.TypeOf(d)
	if t == nil {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == "github.com/lib/pq"
}

// WatchRollback watches tx's rollback as [Watch] watches a statement,
// under the context tx began under: database/sql has no context for a
// rollback, and lib/pq does not watch one, so a rollback on a server that
// stopped answering after that context ended would wait for it however
// long. Call stop once the rollback has returned.
func WatchRollback(tx *sql.Tx) (stop func()) {
	ctx := txContext(tx)
	if ctx == nil {
		return noStop
	}
	return Watch(ctx, tx)
}

// txContext returns the context tx began under, or nil when this Go
// release lays database/sql out otherwise. It is set when the transaction
// begins and never again.
func txContext(tx *sql.Tx) context.Context {
	l := txLayout()
	if tx == nil || !l.ok {
		return nil
	}
	return *(*context.Context)(unsafe.Add(unsafe.Pointer(tx), l.ctx))
}
