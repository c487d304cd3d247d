package advisory_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// The library's own CPU per call, apart from the network and the server:
// each lock call against the same statements sent by hand, on a
// database/sql driver that answers every statement at once (instantDriver).
// The difference between the two is what the library adds: building its
// statement, the checks it makes before it sends it (the engine of the
// session, once per connection; the scope), and reading the answer.

// instantDriverName is the name instantDriver is registered under.
const instantDriverName = "pgadvisory-instant"

func init() { sql.Register(instantDriverName, instantDriver{}) }

// instantDriver is a database/sql driver whose connections answer every
// statement at once, without a server: an Exec affects one row (a try
// that took its lock, an unlock of a lock that was held), a query answers
// one row of true, and the engine probe answers as PostgreSQL does.
type instantDriver struct{}

func (instantDriver) Open(string) (driver.Conn, error) { return &instantConn{}, nil }

// instantConn is a connection of instantDriver.
type instantConn struct{ _ int } // not of size zero, so that the library remembers its engine

var (
	_ driver.ExecerContext  = (*instantConn)(nil)
	_ driver.QueryerContext = (*instantConn)(nil)
	_ driver.ConnBeginTx    = (*instantConn)(nil)
)

func (*instantConn) Prepare(string) (driver.Stmt, error) { return nil, driver.ErrSkip }
func (*instantConn) Close() error                        { return nil }
func (*instantConn) Begin() (driver.Tx, error)           { return instantTx{}, nil }

func (*instantConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	return instantTx{}, nil
}

func (*instantConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}

func (*instantConn) QueryContext(_ context.Context, query string, _ []driver.NamedValue) (driver.Rows, error) {
	if strings.HasPrefix(query, "SELECT pg_catalog.version(), ") {
		return &instantRows{row: []driver.Value{"PostgreSQL 17.0 on x86_64-pc-linux-gnu", "", nil, nil, nil, nil}}, nil
	}
	return &instantRows{row: []driver.Value{true}}, nil
}

// instantTx is a transaction of instantConn.
type instantTx struct{}

func (instantTx) Commit() error   { return nil }
func (instantTx) Rollback() error { return nil }

// instantRows is the one row of a query.
type instantRows struct {
	row  []driver.Value
	done bool
}

func (r *instantRows) Columns() []string { return make([]string, len(r.row)) }
func (r *instantRows) Close() error      { return nil }

func (r *instantRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	copy(dest, r.row)
	return nil
}

// openInstant returns a *sql.DB of instantDriver with one connection, and
// a *sql.Conn of it that has been used once.
func openInstant(b *testing.B) (*sql.DB, *sql.Conn) {
	db, err := sql.Open(instantDriverName, "")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return db, benchConn(b, db)
}

// overheadCases are the calls BenchmarkOverhead measures, each as the
// library makes it (ours) and by hand (hand): the same statements sent
// through ExecContext, the key rendered into the text, which is the form
// the library sends on a driver that is not pgx's.
var overheadCases = []struct {
	name string
	ours func(ctx context.Context, db *sql.DB, conn *sql.Conn, tx *sql.Tx, k int64) error
	hand func(ctx context.Context, db *sql.DB, conn *sql.Conn, tx *sql.Tx, k int64) error
}{
	{"TryLock+Unlock",
		func(ctx context.Context, _ *sql.DB, conn *sql.Conn, _ *sql.Tx, k int64) error {
			key := advisory.Int64Key(k)
			if _, err := advisory.TryLock(ctx, conn, key); err != nil {
				return err
			}
			return advisory.Unlock(ctx, conn, key)
		},
		func(ctx context.Context, _ *sql.DB, conn *sql.Conn, _ *sql.Tx, k int64) error {
			s := strconv.FormatInt(k, 10)
			if err := execOne(ctx, conn, "SELECT 1 WHERE pg_catalog.pg_try_advisory_lock("+s+")"); err != nil {
				return err
			}
			return execOne(ctx, conn, "SELECT 1 WHERE pg_catalog.pg_advisory_unlock("+s+")")
		}},
	{"TryXactLock",
		func(ctx context.Context, _ *sql.DB, _ *sql.Conn, tx *sql.Tx, k int64) error {
			_, err := advisory.TryXactLock(ctx, tx, advisory.Int64Key(k))
			return err
		},
		func(ctx context.Context, _ *sql.DB, _ *sql.Conn, tx *sql.Tx, k int64) error {
			return execOne(ctx, tx, "SELECT 1 WHERE pg_catalog.pg_try_advisory_xact_lock("+strconv.FormatInt(k, 10)+")")
		}},
	{"WithXactLock",
		func(ctx context.Context, db *sql.DB, _ *sql.Conn, _ *sql.Tx, k int64) error {
			return advisory.WithXactLock(ctx, db, advisory.Int64Key(k), noopTx, advisory.Try())
		},
		func(ctx context.Context, db *sql.DB, _ *sql.Conn, _ *sql.Tx, k int64) error {
			return byHandTx(ctx, db, func(tx *sql.Tx) error {
				return execOne(ctx, tx, "SELECT 1 WHERE pg_catalog.pg_try_advisory_xact_lock("+strconv.FormatInt(k, 10)+")")
			})
		}},
}

// BenchmarkOverhead measures the library's own CPU and allocations per
// call, on a driver that answers at once (see instantDriver), as
// BenchmarkOverhead/<call>/ours against BenchmarkOverhead/<call>/hand, the
// same statements sent by hand: the difference is what the library adds
// to a call, apart from the network and the server. It needs no server.
func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	for _, c := range overheadCases {
		for _, v := range []string{"hand", "ours"} {
			b.Run(c.name+"/"+v, func(b *testing.B) {
				op := c.ours
				if v == "hand" {
					op = c.hand
				}
				db, conn := openInstant(b)
				var tx *sql.Tx
				if c.name == "TryXactLock" {
					var err error
					if tx, err = conn.BeginTx(ctx, nil); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = tx.Rollback() })
				} else if c.name == "WithXactLock" {
					conn.Close() // the pool's one connection goes to the scopes
				}
				if err := op(ctx, db, conn, tx, fixedKey); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if err := op(ctx, db, conn, tx, fixedKey+int64(i&1023)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
