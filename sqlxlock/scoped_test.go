package sqlxlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/jmoiron/sqlx"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
	"github.com/pgadvisory/pgadvisory/sqlxlock"
)

// Unit tests on sqlmock: what fn receives, and that advisory's behaviour
// comes through unchanged.

var errBoom = errors.New("boom")

// bindDrivers are sqlx driver names with their bind style, as Rebind
// renders "a = ? AND b = ?".
var bindDrivers = []struct {
	name, rebound string
}{
	{"postgres", "a = $1 AND b = $2"},
	{"pgx", "a = $1 AND b = $2"},
	{"mysql", "a = ? AND b = ?"},
	{"sqlserver", "a = @p1 AND b = @p2"},
	{"oci8", "a = :arg1 AND b = :arg2"},
}

// item is a row for named queries.
type item struct {
	ID   int    `db:"id"`
	Name string `db:"name"`
}

// TestWithXactLockGivesSqlxTx checks that fn's *sqlx.Tx has db's driver
// name, so that Rebind and named queries bind as db does, and db's mapper.
func TestWithXactLockGivesSqlxTx(t *testing.T) {
	t.Parallel()
	for _, d := range bindDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			sqlDB, m := mock.New(t)
			db := sqlx.NewDb(sqlDB, d.name)
			db.MapperFunc(strings.ToUpper)
			key := advisory.PairKey(4, 2)

			mock.ExpectWithXactLock(m, key, mock.XactGranted)
			m.ExpectExec(`^INSERT INTO items \(id, name\) VALUES `).WithArgs(1, "a").WillReturnResult(sqlmock.NewResult(0, 1))
			m.ExpectCommit()

			err := sqlxlock.WithXactLock(context.Background(), db, key, func(ctx context.Context, tx *sqlx.Tx) error {
				if got := tx.DriverName(); got != d.name {
					t.Errorf("DriverName() = %q, want %q", got, d.name)
				}
				if got := tx.Rebind("a = ? AND b = ?"); got != d.rebound {
					t.Errorf("Rebind = %q, want %q", got, d.rebound)
				}
				if tx.Mapper != db.Mapper {
					t.Error("tx.Mapper is not db.Mapper")
				}
				named := "INSERT INTO items (id, name) VALUES (:id, :name)"
				q, _, err := tx.BindNamed(named, map[string]any{"id": 1, "name": "a"})
				want, _, _ := db.BindNamed(named, map[string]any{"id": 1, "name": "a"})
				if err != nil || q != want {
					t.Errorf("BindNamed = %q, %v; want %q as db binds it", q, err, want)
				}
				_, err = tx.NamedExecContext(ctx, "INSERT INTO items (id, name) VALUES (:id, :name)", map[string]any{"id": 1, "name": "a"})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUnsafeCarried checks that db.Unsafe() reaches fn's tx and conn: an
// unsafe sqlx value scans a row with a column the struct lacks.
func TestUnsafeCarried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		unsafe bool
	}{{"Safe", false}, {"Unsafe", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sqlDB, m := mock.New(t)
			db := sqlx.NewDb(sqlDB, "postgres")
			if tc.unsafe {
				db = db.Unsafe()
			}
			key := advisory.Int64Key(9)
			rows := func() *sqlmock.Rows { return sqlmock.NewRows([]string{"id", "name", "extra"}).AddRow(1, "a", "x") }

			mock.ExpectWithXactLock(m, key, mock.XactGranted)
			m.ExpectQuery(`^SELECT`).WillReturnRows(rows())
			m.ExpectCommit()
			s := mock.ExpectWithSessionLock(m, key, mock.SessionGranted)
			m.ExpectQuery(`^SELECT`).WillReturnRows(rows())
			s.ExpectRelease()

			check := func(what string, err error) error {
				if tc.unsafe && err != nil || !tc.unsafe && err == nil {
					t.Errorf("%s Get into a struct without column extra: err = %v, unsafe = %v", what, err, tc.unsafe)
				}
				return nil
			}
			ctx := context.Background()
			if err := sqlxlock.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sqlx.Tx) error {
				var it item
				return check("tx", tx.GetContext(ctx, &it, "SELECT * FROM items"))
			}); err != nil {
				t.Fatal(err)
			}
			if err := sqlxlock.WithSessionLock(ctx, db, key, func(ctx context.Context, conn *sqlx.Conn) error {
				var it item
				return check("conn", conn.GetContext(ctx, &it, "SELECT * FROM items"))
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWithSessionLockGivesSqlxConn checks fn's *sqlx.Conn, and the
// transactions it begins.
func TestWithSessionLockGivesSqlxConn(t *testing.T) {
	t.Parallel()
	for _, d := range bindDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			sqlDB, m := mock.New(t)
			db := sqlx.NewDb(sqlDB, d.name)
			key := advisory.PairKey(4, 3)

			s := mock.ExpectWithSessionLock(m, key, mock.SessionGranted, advisory.Shared())
			m.ExpectBegin()
			m.ExpectExec(`^INSERT INTO items`).WithArgs(2, "b").WillReturnResult(sqlmock.NewResult(0, 1))
			m.ExpectCommit()
			s.ExpectRelease()

			err := sqlxlock.WithSessionLock(context.Background(), db, key, func(ctx context.Context, conn *sqlx.Conn) error {
				if got := conn.Rebind("a = ? AND b = ?"); got != d.rebound {
					t.Errorf("Rebind = %q, want %q", got, d.rebound)
				}
				if conn.Mapper != db.Mapper {
					t.Error("conn.Mapper is not db.Mapper")
				}
				tx, err := conn.BeginTxx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if got := tx.DriverName(); got != d.name {
					t.Errorf("DriverName() of conn.BeginTxx = %q, want %q", got, d.name)
				}
				if _, err := tx.NamedExecContext(ctx, "INSERT INTO items (id, name) VALUES (:id, :name)", item{ID: 2, Name: "b"}); err != nil {
					return err
				}
				return tx.Commit()
			}, advisory.Shared())
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAdvisoryBehaviour checks that outcomes and errors are advisory's.
func TestAdvisoryBehaviour(t *testing.T) {
	t.Parallel()
	key := advisory.NameKey(5, "reports")
	noop := func(context.Context, *sqlx.Tx) error { return nil }
	noopConn := func(context.Context, *sqlx.Conn) error { return nil }
	tests := []struct {
		name   string
		expect func(m sqlmock.Sqlmock)
		call   func(ctx context.Context, db *sqlx.DB) error
		want   error // nil: no error
	}{
		{"XactCommit", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.Commit, advisory.Try()) },
			func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithXactLock(ctx, db, key, noop, advisory.Try())
			}, nil},
		{"XactFnError", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.Rollback) },
			func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithXactLock(ctx, db, key, func(context.Context, *sqlx.Tx) error { return errBoom })
			}, errBoom},
		{"XactPanic", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.Rollback, advisory.Shared()) },
			func(ctx context.Context, db *sqlx.DB) error {
				return recovered(func() error {
					return sqlxlock.WithXactLock(ctx, db, key, func(context.Context, *sqlx.Tx) error { panic(errBoom) }, advisory.Shared())
				})
			}, errBoom},
		{"XactNotAcquired", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.XactNotAcquired, advisory.Try()) },
			func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithXactLock(ctx, db, key, notCalled(t), advisory.Try())
			}, advisory.ErrNotAcquired},
		{"XactTimeout", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.XactFailed, advisory.Wait(1)) },
			func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithXactLock(ctx, db, key, notCalled(t), advisory.Wait(1))
			}, advisory.ErrLockTimeout},
		{"SessionRelease", func(m sqlmock.Sqlmock) { mock.ExpectWithSessionLock(m, key, mock.Release) },
			func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithSessionLock(ctx, db, key, noopConn)
			}, nil},
		{"SessionNotAcquired", func(m sqlmock.Sqlmock) { mock.ExpectWithSessionLock(m, key, mock.SessionNotAcquired, advisory.Try()) },
			func(ctx context.Context, db *sqlx.DB) error {
				return sqlxlock.WithSessionLock(ctx, db, key, func(context.Context, *sqlx.Conn) error {
					t.Error("fn called")
					return nil
				}, advisory.Try())
			}, advisory.ErrNotAcquired},
		{"SessionLost", func(m sqlmock.Sqlmock) {
			mock.ExpectWithSessionLock(m, key, mock.Release).Unlock.WillReturnResult(sqlmock.NewResult(0, 0))
		}, func(ctx context.Context, db *sqlx.DB) error {
			return sqlxlock.WithSessionLock(ctx, db, key, noopConn)
		}, advisory.ErrLockLost},
		{"SessionPanic", func(m sqlmock.Sqlmock) { mock.ExpectWithSessionLock(m, key, mock.SessionGranted) },
			func(ctx context.Context, db *sqlx.DB) error {
				return recovered(func() error {
					return sqlxlock.WithSessionLock(ctx, db, key, func(context.Context, *sqlx.Conn) error { panic(errBoom) })
				})
			}, errBoom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sqlDB, m := mock.New(t)
			tc.expect(m)
			err := tc.call(context.Background(), sqlx.NewDb(sqlDB, "postgres"))
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestBadArguments checks the errors for a nil db or fn, which send
// nothing.
func TestBadArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := advisory.Int64Key(1)
	sqlDB, _ := mock.New(t)
	db := sqlx.NewDb(sqlDB, "postgres")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"XactNilDB", sqlxlock.WithXactLock(ctx, nil, key, func(context.Context, *sqlx.Tx) error { return nil }), "sqlxlock: nil *sqlx.DB"},
		{"XactNilFn", sqlxlock.WithXactLock(ctx, db, key, nil), "sqlxlock: nil fn"},
		{"XactZeroDB", sqlxlock.WithXactLock(ctx, &sqlx.DB{}, key, func(context.Context, *sqlx.Tx) error { return nil }), "sqlxlock: nil *sqlx.DB"},
		{"SessionNilDB", sqlxlock.WithSessionLock(ctx, nil, key, func(context.Context, *sqlx.Conn) error { return nil }), "sqlxlock: nil *sqlx.DB"},
		{"SessionNilFn", sqlxlock.WithSessionLock(ctx, db, key, nil), "sqlxlock: nil fn"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

// notCalled is an fn that fails the test if called.
func notCalled(t *testing.T) func(context.Context, *sqlx.Tx) error {
	return func(context.Context, *sqlx.Tx) error {
		t.Error("fn called")
		return nil
	}
}

// recovered runs f and returns its error, or the error it panicked with.
func recovered(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	return f()
}

// TestBadOptionsSendNothing checks that options advisory refuses are
// refused before any transaction or connection is taken.
func TestBadOptionsSendNothing(t *testing.T) {
	t.Parallel()
	sqlDB, _ := mock.New(t) // no expectations: any statement fails the test
	db := sqlx.NewDb(sqlDB, "postgres")
	ctx := context.Background()
	bad := advisory.Wait(-time.Second)
	if err := sqlxlock.WithXactLock(ctx, db, advisory.Int64Key(1), func(context.Context, *sqlx.Tx) error { return nil }, bad); !errors.Is(err, advisory.ErrBadOption) {
		t.Errorf("WithXactLock with a negative Wait: %v, want ErrBadOption", err)
	}
	if err := sqlxlock.WithSessionLock(ctx, db, advisory.Int64Key(1), func(context.Context, *sqlx.Conn) error { return nil }, bad); !errors.Is(err, advisory.ErrBadOption) {
		t.Errorf("WithSessionLock with a negative Wait: %v, want ErrBadOption", err)
	}
}
