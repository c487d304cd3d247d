package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// exampleDB returns a mock database for the runnable examples: it expects
// the statements each example sends, exactly, laid down by the mock
// package's helpers where the example waits for a lock, so that the
// examples show the SQL of a try and the calls that stand for a wait.
func exampleDB(expect func(m sqlmock.Sqlmock)) *sql.DB {
	db, m, err := mock.NewDB(mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	if err != nil {
		log.Fatal(err)
	}
	expect(m)
	return db
}

// A job runs at most once at a time across every process: the first
// transaction to take the key runs it, the others skip it.
func ExampleWithXactLock() {
	db := exampleDB(func(m sqlmock.Sqlmock) {
		m.ExpectBegin()
		m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(7,-785388649) END").WillReturnResult(sqlmock.NewResult(0, 1))
		m.ExpectExec("UPDATE reports SET built_at = now()").WillReturnResult(sqlmock.NewResult(0, 1))
		m.ExpectCommit()
	})
	defer db.Close()

	ctx := context.Background()
	key := advisory.NameKey(7, "abc")
	err := advisory.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE reports SET built_at = now()")
		return err
	}, advisory.Try())
	switch {
	case errors.Is(err, advisory.ErrNotAcquired):
		fmt.Println("another process is building the report")
	case err != nil:
		fmt.Println("failed:", err)
	default:
		fmt.Println("report built; lock released at commit")
	}
	// Output: report built; lock released at commit
}

// A session lock spans several transactions, such as a migration that runs
// one step at a time; other callers wait up to five seconds. A free key is
// taken by the first statement of the wait, as here; a busy one is waited
// for in slices of about a second, each a statement of its own.
func ExampleWithSessionLock() {
	migrations := advisory.PairKey(1, 1)
	db := exampleDB(func(m sqlmock.Sqlmock) {
		// The lock, granted, then the release.
		mock.ExpectWithSessionLock(m, migrations, mock.Release, advisory.Wait(5*time.Second))
	})
	defer db.Close()

	err := advisory.WithSessionLock(context.Background(), db, migrations, func(ctx context.Context, conn *sql.Conn) error {
		fmt.Println("migrating while holding", migrations)
		return nil
	}, advisory.Wait(5*time.Second))
	fmt.Println("done:", err)
	// Output:
	// migrating while holding 1:1
	// done: <nil>
}

// TryXactLock lets a worker skip a job that another worker holds, inside
// the same transaction as the job's writes.
func ExampleTryXactLock() {
	db := exampleDB(func(m sqlmock.Sqlmock) {
		m.ExpectBegin()
		m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(2,1001) END").WillReturnResult(sqlmock.NewResult(0, 0))
		m.ExpectRollback()
	})
	defer db.Close()

	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // releases the lock, if taken

	ok, err := advisory.TryXactLock(ctx, tx, advisory.PairKey(2, 1001))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired:", ok)
	// Output: acquired: false
}

// A session lock on a dedicated *sql.Conn must be unlocked; Unlock reports
// a key that was not held.
func ExampleLock() {
	key := advisory.Int64Key(42)
	db := exampleDB(func(m sqlmock.Sqlmock) {
		mock.ExpectLock(m, key)         // the try that starts the wait, granted
		mock.ExpectUnlock(m, key, true) // held
	})
	defer db.Close()

	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	if err := advisory.Lock(ctx, conn, key); err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", key)
	if err := advisory.Unlock(ctx, conn, key); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released", key)
	// Output:
	// holding 42
	// released 42
}

// LockKeys takes several keys in one round trip, in a canonical order, so
// that two callers locking the same set in a different order cannot
// deadlock.
func ExampleLockKeys() {
	a, b := advisory.Int64Key(2), advisory.Int64Key(1)
	db := exampleDB(func(m sqlmock.Sqlmock) {
		mock.ExpectLockKeys(m, a, b) // one statement, both granted
		m.ExpectExec("SELECT 1 FROM (VALUES (1),(2)) AS k(k) WHERE pg_catalog.pg_advisory_unlock(k)").
			WillReturnResult(sqlmock.NewResult(0, 2))
	})
	defer db.Close()

	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	if err := advisory.LockKeys(ctx, conn, a, b); err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding both")
	if err := advisory.UnlockKeys(ctx, conn, a, b); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released both")
	// Output:
	// holding both
	// released both
}

func ExampleParseKey() {
	for _, s := range []string{"42", "1:1234", "7:nightly", `7:"2024"`, "1:2:3"} {
		k, err := advisory.ParseKey(s)
		fmt.Println(k, k.IsPair(), err)
	}
	// Output:
	// 42 false <nil>
	// 1:1234 true <nil>
	// 7:2091003772 true <nil>
	// 7:1367300774 true <nil>
	// 0 false advisory: malformed key "1:2:3": after the colon, "2:3" is not a decimal integer; a name that begins with a digit or a sign is quoted, as in 7:"2024-report"
}

func ExampleKey_Compare() {
	fmt.Println(advisory.Int64Key(1<<32 | 2).Compare(advisory.PairKey(1, 2)))
	// Output: -1
}

// A worker holds a lease on each tenant it serves, thousands of them, on
// the Locker's few connections; a tenant another process serves is
// skipped. (It needs a server, so it is not run.)
func ExampleNewLocker() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	locker, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close(ctx)

	tenants := advisory.Namespace{ID: 2, Name: "tenants"}
	for _, id := range []string{"acme", "globex"} {
		l, err := locker.Acquire(ctx, tenants.NameKey(id), advisory.Try(), advisory.Fencing())
		if errors.Is(err, advisory.ErrNotAcquired) {
			continue // another process serves it
		}
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer l.Release(context.WithoutCancel(ctx))
			serve(l.Context(), id, l.Token()) // ends when the lease is lost
		}()
	}
}

func serve(ctx context.Context, tenant string, token int64) { <-ctx.Done() }
