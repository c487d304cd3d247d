package mock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/mock"
)

// jobsNS is the key namespace of the job claimer below.
const jobsNS = 3

// claimJob is code under test: it runs job id unless another worker holds
// it, and reports whether it ran it.
func claimJob(ctx context.Context, db *sql.DB, id int32) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() // releases the lock, if the commit did not

	ok, err := advisory.TryXactLock(ctx, tx, advisory.PairKey(jobsNS, id))
	if err != nil || !ok {
		return false, err // another worker is on it
	}
	if _, err := tx.ExecContext(ctx, "UPDATE jobs SET done = true WHERE id = $1", id); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// A job claimer skips a job that another worker holds. Its test lays down
// the lock with ExpectTryXactLock and its own statements with sqlmock, in
// the order the claimer sends them.
func ExampleExpectTryXactLock() {
	db, m, err := sqlmock.New()
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// The first claim finds the job free and runs it.
	m.ExpectBegin()
	mock.ExpectTryXactLock(m, advisory.PairKey(jobsNS, 7), true)
	m.ExpectExec(`UPDATE jobs SET done = true WHERE id = \$1`).WithArgs(7).WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()
	// The second finds it held, and leaves it alone.
	m.ExpectBegin()
	mock.ExpectTryXactLock(m, advisory.PairKey(jobsNS, 7), false)
	m.ExpectRollback()

	for range 2 {
		ran, err := claimJob(context.Background(), db, 7)
		fmt.Println("ran:", ran, "err:", err)
	}
	fmt.Println("expectations met:", m.ExpectationsWereMet() == nil)
	// Output:
	// ran: true err: <nil>
	// ran: false err: <nil>
	// expectations met: true
}

// ordersNS is the key namespace of the order routes below.
const ordersNS = 12

// pay is a handler under test. It runs behind httplock.XactLock, in the
// request's transaction, which holds the order's lock.
func pay(w http.ResponseWriter, r *http.Request) {
	tx, _ := advisory.TxFromContext(r.Context())
	if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = $1", r.PathValue("id")); err != nil {
		http.Error(w, "could not pay", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// A handler behind httplock.XactLock, tested without a database. The
// middleware is advisory.WithXactLock with advisory.Try, so
// ExpectWithXactLock lays down its transaction: Granted stops after the
// lock so the test can expect the handler's statement before the COMMIT,
// and NotAcquired plays a second request that finds the order busy and is
// answered 409 without reaching the handler.
func ExampleExpectWithXactLock() {
	db, m, err := sqlmock.New()
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	order := advisory.PairKey(ordersNS, 7)
	mock.ExpectWithXactLock(m, order, mock.XactGranted, advisory.Try())
	m.ExpectExec(`UPDATE orders SET paid = true WHERE id = \$1`).WithArgs("7").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()
	mock.ExpectWithXactLock(m, order, mock.XactNotAcquired, advisory.Try())

	mux := http.NewServeMux()
	lock := httplock.XactLock(db, httplock.PathKey(ordersNS, "id"))
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(pay)))

	for range 2 {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/7/pay", nil))
		fmt.Println(w.Code, http.StatusText(w.Code))
	}
	fmt.Println("expectations met:", m.ExpectationsWereMet() == nil)
	// Output:
	// 204 No Content
	// 409 Conflict
	// expectations met: true
}

// migrate is code under test: it runs every step of a migration while it
// holds a session lock, waiting at most ten seconds for it.
func migrate(ctx context.Context, db *sql.DB, steps ...string) error {
	return advisory.WithSessionLock(ctx, db, advisory.PairKey(1, 1), func(ctx context.Context, conn *sql.Conn) error {
		for _, s := range steps {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}, advisory.Wait(10*time.Second))
}

// A bounded wait for a session lock, granted once and timed out once.
// Failed makes the lock statement fail as a lock_timeout does.
func ExampleExpectWithSessionLock() {
	db, m, err := mock.NewDB(mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	s := mock.ExpectWithSessionLock(m, advisory.PairKey(1, 1), mock.SessionGranted, advisory.Wait(10*time.Second))
	m.ExpectExec("ALTER TABLE jobs ADD COLUMN owner text").WillReturnResult(sqlmock.NewResult(0, 0))
	s.ExpectRelease()
	mock.ExpectWithSessionLock(m, advisory.PairKey(1, 1), mock.SessionFailed, advisory.Wait(10*time.Second))

	fmt.Println("first:", migrate(context.Background(), db, "ALTER TABLE jobs ADD COLUMN owner text"))
	err = migrate(context.Background(), db, "ALTER TABLE jobs ADD COLUMN owner text")
	fmt.Println("second timed out:", errors.Is(err, advisory.ErrLockTimeout))
	fmt.Println("expectations met:", m.ExpectationsWereMet() == nil)
	// Output:
	// first: <nil>
	// second timed out: true
	// expectations met: true
}

// reportKey is the key of the nightly report below.
var reportKey = advisory.NameKey(7, "nightly-report")

// buildReport is code under test: it builds the nightly report under a
// lease, unless another worker holds it, and stamps the report with the
// lease's fencing token so that the table can refuse a stale writer.
func buildReport(ctx context.Context, db *sql.DB) error {
	l, err := advisory.Acquire(ctx, db, reportKey, advisory.Try(), advisory.Fencing(), advisory.Heartbeat(10*time.Second))
	if err != nil {
		return err
	}
	_, err = db.ExecContext(l.Context(), "INSERT INTO reports (token) VALUES ($1)", l.Token())
	return errors.Join(err, l.Release(context.WithoutCancel(ctx)))
}

// A lease, granted once with fencing token 8 and refused once. The test
// releases the lease before its first heartbeat is due, so it lays down
// none.
func ExampleExpectAcquire() {
	db, m, err := sqlmock.New()
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	opts := []advisory.LeaseOption{advisory.Try(), advisory.Fencing(), advisory.Heartbeat(10 * time.Second)}
	s := mock.ExpectAcquire(m, reportKey, mock.LeaseGranted, opts...).WithToken(8)
	m.ExpectExec(`INSERT INTO reports \(token\) VALUES \(\$1\)`).WithArgs(s.Token).WillReturnResult(sqlmock.NewResult(0, 1))
	s.ExpectRelease()
	mock.ExpectAcquire(m, reportKey, mock.LeaseNotAcquired, opts...)

	fmt.Println("first:", buildReport(context.Background(), db))
	err = buildReport(context.Background(), db)
	fmt.Println("second busy:", errors.Is(err, advisory.ErrNotAcquired))
	fmt.Println("expectations met:", m.ExpectationsWereMet() == nil)
	// Output:
	// first: <nil>
	// second busy: true
	// expectations met: true
}
