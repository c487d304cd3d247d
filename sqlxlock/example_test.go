package sqlxlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/jmoiron/sqlx"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
	"github.com/pgadvisory/pgadvisory/sqlxlock"
)

// run is a row for the examples' named queries.
type run struct {
	Job   string `db:"job"`
	Owner string `db:"owner"`
}

// A nightly job runs at most once at a time across every process; fn
// writes with a named query, which sqlx binds for PostgreSQL. The examples
// run on go-sqlmock, with the expectations of package mock.
func ExampleWithXactLock() {
	sqlDB, m, err := mock.NewDB(mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	if err != nil {
		log.Fatal(err)
	}
	defer sqlDB.Close()
	key := advisory.NameKey(7, "nightly")
	mock.ExpectWithXactLock(m, key, mock.XactGranted, advisory.Try())
	m.ExpectExec("INSERT INTO runs (job, owner) VALUES ($1, $2)").WithArgs("nightly", "worker-1").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()
	mock.ExpectWithXactLock(m, key, mock.XactNotAcquired, advisory.Try())

	db := sqlx.NewDb(sqlDB, "postgres")
	nightly := func(ctx context.Context) error {
		return sqlxlock.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sqlx.Tx) error {
			_, err := tx.NamedExecContext(ctx, "INSERT INTO runs (job, owner) VALUES (:job, :owner)", run{"nightly", "worker-1"})
			return err
		}, advisory.Try())
	}
	for range 2 {
		switch err := nightly(context.Background()); {
		case errors.Is(err, advisory.ErrNotAcquired):
			fmt.Println("another process is running it")
		case err != nil:
			fmt.Println("failed:", err)
		default:
			fmt.Println("ran; the lock was released at commit")
		}
	}
	// Output:
	// ran; the lock was released at commit
	// another process is running it
}

// A session lock spans several transactions; each one begun on the
// *sqlx.Conn binds as db does.
func ExampleWithSessionLock() {
	sqlDB, m, err := sqlmock.New()
	if err != nil {
		log.Fatal(err)
	}
	defer sqlDB.Close()
	key := advisory.PairKey(1, 1)
	s := mock.ExpectWithSessionLock(m, key, mock.SessionGranted)
	for range 2 {
		m.ExpectBegin()
		m.ExpectExec(`^UPDATE runs SET owner = \$1 WHERE job = \$2$`).WillReturnResult(sqlmock.NewResult(0, 1))
		m.ExpectCommit()
	}
	s.ExpectRelease()

	db := sqlx.NewDb(sqlDB, "pgx")
	err = sqlxlock.WithSessionLock(context.Background(), db, key, func(ctx context.Context, conn *sqlx.Conn) error {
		for _, job := range []string{"a", "b"} {
			tx, err := conn.BeginTxx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.NamedExecContext(ctx, "UPDATE runs SET owner = :owner WHERE job = :job", run{job, "me"}); err != nil {
				_ = tx.Rollback()
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			fmt.Println("moved", job)
		}
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// moved a
	// moved b
	// done: <nil>
}

// The lock functions take the *sql.Tx or *sql.Conn that a *sqlx.Tx or
// *sqlx.Conn embeds.
func Example_lockFunctions() {
	sqlDB, m, err := sqlmock.New()
	if err != nil {
		log.Fatal(err)
	}
	defer sqlDB.Close()
	key := advisory.Int64Key(42)
	m.ExpectBegin()
	mock.ExpectTryXactLock(m, key, true)
	m.ExpectCommit()

	ctx := context.Background()
	db := sqlx.NewDb(sqlDB, "postgres")
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	ok, err := advisory.TryXactLock(ctx, tx.Tx, key) // released when tx ends
	fmt.Println("acquired:", ok, err)
	fmt.Println("commit:", tx.Commit())
	// Output:
	// acquired: true <nil>
	// commit: <nil>
}
