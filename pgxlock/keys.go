package pgxlock

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// errNoKeys is the error of a multi-key call given no keys.
var errNoKeys = errors.New("pgxlock: no keys")

// LockKeys waits until it holds an exclusive session lock on every key,
// taken in [advisory.Key.Compare] order with duplicates removed, so that
// sessions locking overlapping sets never deadlock one another. Each lock
// is held until [UnlockKeys], [UnlockAll], or the end of the session. It
// waits as [Lock] does, in slices, and a free set costs one statement.
//
// A statement that fails partway keeps the locks it took, so on any error
// LockKeys closes the connection, releasing them all, as [Lock] does.
func LockKeys[C Conn](ctx context.Context, conn C, keys ...advisory.Key) error {
	s := session(conn)
	switch {
	case s == nil:
		return errNilConn
	case len(keys) == 0:
		return errNoKeys
	}
	o := scope.Options{}
	_, err := scope.Take(ctx, scope.DefaultHooks(), s, "lock", sqltext.KeysOf(canonical(keys)), &o, sqltext.Params)
	return err
}

// UnlockKeys releases one exclusive session lock on every key, duplicates
// removed, as [Unlock] does for one. It undoes [LockKeys].
func UnlockKeys[C Conn](ctx context.Context, conn C, keys ...advisory.Key) error {
	s := session(conn)
	switch {
	case s == nil:
		return errNilConn
	case len(keys) == 0:
		return errNoKeys
	}
	sk := sqltext.KeysOf(canonical(keys))
	return scope.Release(ctx, s, "unlock", sk, sqltext.Plain(sqltext.Unlock(false, sk...)))
}

// XactLockKeys waits until it holds an exclusive transaction lock on
// every key, taken in [advisory.Key.Compare] order with duplicates
// removed, so that transactions locking overlapping sets never deadlock
// one another. The locks are released when tx commits or rolls back. It
// waits as [XactLock] does, each slice under a savepoint of tx's.
func XactLockKeys(ctx context.Context, tx pgx.Tx, keys ...advisory.Key) error {
	t := transaction(tx)
	switch {
	case t == nil:
		return errNilTx
	case len(keys) == 0:
		return errNoKeys
	}
	o := scope.Options{}
	_, err := scope.XactTake(ctx, scope.DefaultHooks(), t, false, "xact lock", sqltext.KeysOf(canonical(keys)), &o, sqltext.Params)
	return err
}

// canonical returns keys in the order every multi-key call takes them,
// without duplicates, leaving the caller's slice as it was.
func canonical(keys []advisory.Key) []advisory.Key {
	out := slices.Clone(keys)
	slices.SortFunc(out, advisory.Key.Compare)
	return slices.Compact(out)
}
