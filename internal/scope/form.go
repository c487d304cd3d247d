package scope

import (
	"context"
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

// DBForm returns the form of statement db's driver runs fastest. The
// scopes that begin their transaction or take their connection from a
// *sql.DB pass it on.
func DBForm(db *sql.DB) sqltext.Form {
	if db == nil {
		return sqltext.Inline
	}
	return formOf(db.Driver())
}

// TxForm returns the form of the statements of a lock call on tx under
// ctx: the form of tx's driver. A transaction a scope began
// (WithXactLock), when ctx descends from the context the scope gave its
// fn, gets the scope's form, which the scope knew from its *sql.DB
// ([DBForm]). database/sql gives no way to ask a *sql.Tx for its driver,
// so a transaction the caller began gets the form of the driver's
// connection the watchdog finds under it ([txDriverConn]); when that
// cannot be found, because tx has ended (the statement then fails itself)
// or this Go release lays database/sql out otherwise, it gets the Inline
// form, one round trip on every driver.
func TxForm(ctx context.Context, tx *sql.Tx) sqltext.Form {
	if tx == nil {
		return sqltext.Inline
	}
	if s, ok := ctx.Value(xactScopeKey{}).(*xactScope); ok && s.tx == SQLTx(tx) {
		return s.form
	}
	if c := txDriverConn(tx); c != nil {
		return formOf(c)
	}
	return sqltext.Inline
}
