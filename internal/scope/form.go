package scope

import (
	"database/sql"
	"reflect"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// paramsDriver is the package of the one driver known to run a statement
// with parameters faster than the same statement with its key in the
// text: pgx's database/sql driver. In its default mode it prepares a
// statement the first time a connection sends its text, keeps it in a
// cache of 512 per connection, and from then on sends only Bind and
// Execute, in one round trip, with nothing for the server to parse. Its
// other modes cost one round trip too, except describe_exec, which costs
// two for every query with arguments, the application's own included.
//
// The driver is known by its package's path, so that advisory imports no
// driver.
const paramsDriver = "github.com/jackc/pgx/v5/stdlib"

// formOf returns the form of statement that v, a driver's connection or
// the driver itself, runs fastest.
func formOf(v any) sqltext.Form {
	if isPgx(v) {
		return sqltext.Params
	}
	return sqltext.Inline
}

// isPgx reports whether v, a driver's connection or the driver itself, is
// pgx's. A driver that wraps pgx's, as tracing wrappers do, is not.
func isPgx(v any) bool {
	t := reflect.TypeOf(v)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == paramsDriver
}

// ConnForm returns the form of statement conn's driver runs fastest. It
// asks the driver's connection through conn.Raw, which sends nothing; a
// closed conn gets the Inline form, and fails the statement itself.
func ConnForm(conn *sql.Conn) sqltext.Form {
	form := sqltext.Inline
	if conn != nil {
		_ = conn.Raw(func(dc any) error {
			form = formOf(dc)
			return nil
		})
	}
	return form
}

// DBForm returns the form of statement db's driver runs fastest.
func DBForm(db *sql.DB) sqltext.Form {
	if db == nil {
		return sqltext.Inline
	}
	return formOf(db.Driver())
}

// TxForm returns the form of statement tx's driver runs fastest: the form
// of the *sql.DB tx was begun on, found by [txDB], whoever began it. A
// transaction whose *sql.DB cannot be found gets the Inline form, one
// round trip on every driver.
func TxForm(tx *sql.Tx) sqltext.Form {
	return DBForm(txDB(tx))
}

// txDBField and connDBField are the indexes of the fields of database/sql's
// Tx and Conn that hold the *sql.DB the transaction was begun on, or the
// connection taken from; -1 when this Go's type has none.
//
// database/sql gives no way to ask a *sql.Tx for its driver, and a caller's
// transaction on pgx would otherwise pay for a parse and a plan on every
// lock; nor a *sql.Conn or *sql.Tx for its *sql.DB, under which the
// server's engine is known once ([CheckSession]). The field has been the
// first of Tx and of Conn, named db and of type *DB, since database/sql
// began; it is set when the transaction begins or the connection is taken
// and never written again, so reading it races with nothing. It is looked
// up once by name and type, and if a Go release changes it, every
// transaction falls back to the Inline form, correct on every driver, and
// the engine goes unchecked. TestTxDB and TestConnDB fail on such a
// release, so that the change is seen.
var (
	txDBField   = dbField(reflect.TypeFor[sql.Tx]())
	connDBField = dbField(reflect.TypeFor[sql.Conn]())
)

// dbField returns the index of t's field db of type *sql.DB, or -1.
func dbField(t reflect.Type) int {
	f, ok := t.FieldByName("db")
	if !ok || len(f.Index) != 1 || f.Type != reflect.TypeFor[*sql.DB]() {
		return -1
	}
	return f.Index[0]
}

// txDB returns the *sql.DB tx was begun on, or nil when it cannot be
// known. It sends nothing and costs a few nanoseconds.
func txDB(tx *sql.Tx) *sql.DB {
	if tx == nil || txDBField < 0 {
		return nil
	}
	return (*sql.DB)(reflect.ValueOf(tx).Elem().Field(txDBField).UnsafePointer())
}

// connDB returns the *sql.DB conn was taken from, or nil when it cannot be
// known. It sends nothing and costs a few nanoseconds.
func connDB(conn *sql.Conn) *sql.DB {
	if conn == nil || connDBField < 0 {
		return nil
	}
	return (*sql.DB)(reflect.ValueOf(conn).Elem().Field(connDBField).UnsafePointer())
}
