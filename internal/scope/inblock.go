package scope

import (
	"context"
	"database/sql"
	"reflect"
)

// A wait for one session lock sends its slices in the form that does
// nothing after the grant when no transaction block is open on the
// session (see [sqltext.DirectSliceStmt]). The settings statement tells
// whether one is, by whether its start is its transaction's; that holds
// for a statement sent in the simple protocol, as lib/pq sends one without
// arguments. In the extended protocol the server starts the transaction
// at Bind and the statement at Execute, so that the statement always looks
// like one inside a block: safe, since a slice in a block is the one that
// puts the bound back, but slower. A session whose driver knows its
// transaction status says so itself.

// A blockTeller is a session that knows whether a transaction block is
// open on it, from its driver's connection, without asking the server.
type blockTeller interface {
	// InBlock reports whether a transaction block is open on the
	// session, and whether it could tell.
	InBlock() (in, known bool)
}

// InBlock reports, for a connection of pgx's database/sql driver, whether
// a transaction block is open on it, from the status the server gave in
// its last ReadyForQuery; other drivers cannot tell.
func (c *sqlConn) InBlock() (in, known bool) {
	_ = rawConn((*sql.Conn)(c), func(dc any) error {
		in, known = pgxInBlock(dc)
		return nil
	})
	return in, known
}

// pgxInBlock reads the transaction status of dc, a driver's connection,
// when it is pgx's: its Conn method returns pgx's connection, whose
// PgConn's TxStatus is 'I' when idle, outside a block. It goes by
// reflection, so that advisory imports no driver.
func pgxInBlock(dc any) (in, known bool) {
	if !isPgx(dc) {
		return false, false
	}
	v := reflect.ValueOf(dc)
	for _, name := range []string{"Conn", "PgConn"} {
		m := v.MethodByName(name)
		if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
			return false, false
		}
		if v = m.Call(nil)[0]; v.Kind() == reflect.Pointer && v.IsNil() {
			return false, false
		}
	}
	status, ok := v.Interface().(interface{ TxStatus() byte })
	if !ok {
		return false, false
	}
	return status.TxStatus() != 'I', true
}

// sessionWaitSettings reads the settings that bound a wait on s, and
// takes whether a transaction block is open from s itself when it can
// tell.
func sessionWaitSettings(ctx context.Context, s Session) (waitSettings, error) {
	set, err := readWaitSettings(ctx, s)
	if b, ok := s.(blockTeller); ok && err == nil {
		if in, known := b.InBlock(); known {
			set.inBlock = in
		}
	}
	return set, err
}
