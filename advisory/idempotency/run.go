package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// An Outcome says which case [Run] hit.
type Outcome int

const (
	// Ran means fn ran in this call and its work and its result were
	// committed together.
	Ran Outcome = iota + 1
	// Done means an earlier run of the operation committed; fn was not
	// called, and the result is the one that run stored.
	Done
	// InProgress means another transaction is running the operation now
	// (or, rarely, another operation whose key hashes to the same lock);
	// fn was not called and nothing is known of the result yet. Run
	// returns an error matching [ErrInProgress] with it.
	InProgress
)

// String returns "ran", "done" or "in progress".
func (o Outcome) String() string {
	switch o {
	case Ran:
		return "ran"
	case Done:
		return "done"
	case InProgress:
		return "in progress"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is what [Run] reports about an operation.
type Result struct {
	// Outcome says which case Run hit.
	Outcome Outcome
	// Value is what fn returned when it ran, in this call (Ran) or in
	// the first one (Done); nil for InProgress. A nil value is stored as
	// NULL and comes back nil.
	Value []byte
	// At is when the transaction of the run that recorded the operation
	// began, by the server's clock; zero for InProgress.
	At time.Time
}

// A Func does an operation's work in tx and returns what a later delivery
// of the same operation should get back, such as a response to replay. It
// must do all its database work in tx, and must not commit or roll tx
// back. Returning an error rolls back its work, records nothing, and makes
// [Run] return that error; the next delivery runs it again.
type Func func(ctx context.Context, tx *sql.Tx) ([]byte, error)

// MaxKeyLen is the longest operation key, in bytes, that [Run] accepts.
const MaxKeyLen = 512

// Errors. Match them with [errors.Is].
var (
	// ErrInProgress means another transaction is running the operation
	// at this moment. The error Run returns with it also matches the
	// lock's own error, advisory.ErrNotAcquired or, with [Wait],
	// advisory.ErrLockTimeout.
	ErrInProgress = errors.New("idempotency: operation in progress elsewhere")
	// ErrBadKey means the operation key is empty, longer than
	// [MaxKeyLen] bytes, not valid UTF-8, or holds a NUL byte, which a
	// PostgreSQL text value cannot.
	ErrBadKey = errors.New("idempotency: bad operation key")
	// ErrBadOption means an option's value cannot be used: a bad
	// [Table] name or [Wait] duration, or a negative [Purge] age. It also
	// matches advisory.ErrBadOption, as the other recipes' option errors
	// do, so that one errors.Is test covers every package.
	ErrBadOption error = badOption{}

	errNilDB   = errors.New("idempotency: nil *sql.DB")
	errNilFunc = errors.New("idempotency: nil Func")
)

// badOption is [ErrBadOption]: the package's own error, which also
// matches advisory.ErrBadOption.
type badOption struct{}

func (badOption) Error() string        { return "idempotency: bad option" }
func (badOption) Is(target error) bool { return target == advisory.ErrBadOption }

// errRecorded is what the locked step returns when its insert found the
// operation recorded by a run that its lock did not keep out (see the
// package documentation's Isolation section).
var errRecorded = errors.New("idempotency: recorded meanwhile")

// checkKey returns an error matching ErrBadKey if key cannot be an
// operation key.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrBadKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrBadKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrBadKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: holds a NUL byte", ErrBadKey)
	}
	return nil
}

// Run runs fn at most once for the operation key, however often and
// however concurrently the operation is delivered, and reports which case
// it hit. It:
//
//  1. looks the key up in the processed-operations table, without a
//     transaction; a record found is [Done], with the stored result, at
//     the cost of one statement;
//  2. otherwise begins a transaction and takes a transaction lock on
//     advisory.NameKey(ns, key) ([DefaultNamespace] unless [Namespace]
//     says otherwise), without waiting unless [Wait] says so; a lock that
//     another transaction holds is [InProgress];
//  3. looks the key up again under the lock, since a run may have
//     committed between step 1 and the lock; found, it is Done;
//  4. runs fn in the transaction and inserts the record, key and fn's
//     result, in the same transaction, then commits: [Ran].
//
// So fn's work and the record commit together or not at all. A crash,
// a lost connection or an error before the commit leaves neither, and the
// next delivery runs fn again; after the commit every delivery gets Done,
// until [Purge] deletes the record. The lock ends with the transaction.
//
// For InProgress, Run returns a Result with that Outcome and an error
// matching [ErrInProgress]. When fn fails, Run returns fn's error itself
// (joined with a rollback failure if there was one) and a zero Result. Any
// other failure, such as an unreachable database or a cancelled ctx, is
// returned wrapped, with a zero Result; nothing was committed then, unless
// the commit itself failed in doubt, which the next delivery finds out.
//
// When ctx ends during the run, Run does not wait for the server: the
// operation's lock ends when the server has rolled the transaction back,
// which can be a moment after Run returned. A driver that closes the connection instead
// of rolling back, as pgx's does once the transaction's context has ended,
// leaves the rollback to the server, which does it when it notices the
// connection gone: usually within tens of milliseconds, on a loaded server
// up to seconds later. A delivery in that moment gets InProgress, although
// nothing of the cancelled run will commit; one with [Wait] waits for the
// rollback and then runs fn. Retry with Wait, or treat InProgress as
// "redeliver later", as for any other run in progress.
//
// If the table is missing, Run creates it with [Setup] first, unless
// [NoCreate] is given. Run itself needs SELECT and INSERT on the table.
func Run(ctx context.Context, db *sql.DB, key string, fn Func, opts ...RunOption) (Result, error) {
	switch {
	case db == nil:
		return Result{}, errNilDB
	case fn == nil:
		return Result{}, errNilFunc
	}
	if err := checkKey(key); err != nil {
		return Result{}, err
	}
	o, table, err := parse(opts)
	if err != nil {
		return Result{}, err
	}

	res, found, err := lookup(ctx, db, table, key)
	if code := sqlState(err); (code == undefinedTable || code == undefinedSchema) && !o.noCreate {
		if err = setup(ctx, db, table, o.table == DefaultTable); err != nil {
			return Result{}, err
		}
		res, found, err = lookup(ctx, db, table, key)
	}
	if err != nil || found {
		return res, err
	}

	res = Result{}
	err = advisory.WithXactLock(ctx, db, advisory.NameKey(o.ns, key), func(ctx context.Context, tx *sql.Tx) error {
		var found bool
		var err error
		if res, found, err = lookup(ctx, tx, table, key); err != nil || found {
			return err
		}
		value, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		var at time.Time
		if err := tx.QueryRowContext(ctx, fmt.Sprintf(insertSQL, table), key, value).Scan(&at); err != nil {
			if sqlState(err) == uniqueViolation {
				return errRecorded
			}
			return fmt.Errorf("idempotency: record operation: %w", err)
		}
		res = Result{Outcome: Ran, Value: value, At: at}
		return nil
	}, o.lockOptions()...)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, errRecorded):
		// fn's work was rolled back; the run that recorded the
		// operation has committed, so its result is there.
		res, found, err := lookup(ctx, db, table, key)
		if err == nil && !found {
			err = fmt.Errorf("idempotency: operation %q recorded and then gone", key)
		}
		return res, err
	case errors.Is(err, advisory.ErrNotAcquired), errors.Is(err, advisory.ErrLockTimeout):
		return Result{Outcome: InProgress}, fmt.Errorf("%w: %w", ErrInProgress, err)
	}
	return Result{}, err
}

// querier is what lookup needs of a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// lookup reads the record of key: a Done result and true if there is
// one.
func lookup(ctx context.Context, q querier, table, key string) (Result, bool, error) {
	res := Result{Outcome: Done}
	err := q.QueryRowContext(ctx, fmt.Sprintf(selectSQL, table), key).Scan(&res.Value, &res.At)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Result{}, false, nil
	case err != nil:
		return Result{}, false, fmt.Errorf("idempotency: look up operation: %w", err)
	}
	return res, true, nil
}
