package advisory

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// TryLockAny tries keys in the order given and takes an exclusive session
// lock on the first that is free, without waiting, in one statement: it
// takes one key or none. It returns the key it took and true, or false
// when every key is taken. The lock is held until [Unlock], [UnlockAll],
// or the end of the session.
//
// The keys must be of one key space: all bigint keys ([Int64Key]), or all
// pairs with the same first integer, as [NameKey]s of one namespace are.
// None may be given twice. Otherwise TryLockAny sends nothing and returns
// an error matching [ErrBadKey]; with no keys, an error.
//
// It refuses, taking nothing and keeping the session, with [ErrStandby]
// on a hot standby, and with [ErrSharedSession] on a session that bears
// the mark of a lease other than one held on conn itself: unlike
// [TryLock], a lease that ctx descends from does not make its mark the
// call's own. On any other error TryLockAny takes nothing and closes the
// session, since the statement may have taken a key before it failed; on
// a server that stops answering it returns within ctx's deadline plus
// [AbortMargin].
func TryLockAny(ctx context.Context, conn *sql.Conn, keys ...Key) (Key, bool, error) {
	sk, err := anyKeys("try lock any", keys)
	if err != nil {
		return Key{}, false, err
	}
	i, err := scope.TryAny(ctx, conn, sk)
	if err != nil || i < 0 {
		return Key{}, false, err
	}
	return keys[i], true, nil
}

// LockAnyWithin is [TryLockAny] that, when every key is taken, waits in
// the same statement for keys[0], for up to d, and takes it: no key can
// free unseen between the try and the wait. It returns the key it took.
// The lock is held until [Unlock], [UnlockAll], or the end of the session.
// It takes the keys TryLockAny takes, and refuses as it does.
//
// d must be more than 0 and at most a second: the wait is one statement,
// which holds a snapshot while it waits (see [WaitSlice]). It is rounded
// up to whole milliseconds, and shortened below nine tenths of the
// session's statement_timeout, so that the wait ends before it. Another
// d is an error matching [ErrBadOption], and nothing is sent. To wait
// longer, call LockAnyWithin again: each call tries every key afresh.
//
// LockAnyWithin is for a session kept for the wait: the statement first
// releases every session lock conn holds, as [UnlockAll] does, so that
// the key that an earlier call's cancelled wait may have left held is not
// taken twice.
//
// A wait that runs out returns an error matching [ErrLockTimeout], holding
// nothing, and the session stays open. So does a wait that the server
// cancels while ctx is live (SQLSTATE 57014, as [CancelWaiters] or
// pg_cancel_backend sends): the session may then hold keys[0], granted as
// the cancel landed, so call LockAnyWithin again on conn, or [UnlockAll],
// before conn goes back to the pool. If ctx ends the wait, or on any other
// error, it takes nothing and closes the session, as [Lock] does.
func LockAnyWithin(ctx context.Context, conn *sql.Conn, d time.Duration, keys ...Key) (Key, error) {
	sk, err := anyKeys("lock any", keys)
	if err != nil {
		return Key{}, err
	}
	if d <= 0 || d > scope.DefaultSlice {
		return Key{}, fmt.Errorf("%w: LockAnyWithin(%v): want more than 0 and at most %v", ErrBadOption, d, scope.DefaultSlice)
	}
	i, err := scope.WaitAny(ctx, conn, sk, d)
	if err != nil {
		return Key{}, err
	}
	return keys[i], nil
}

// anyKeys returns keys as statements need them, or the error of op that
// says why they cannot go into one statement (see [TryLockAny]).
func anyKeys(op string, keys []Key) ([]sqltext.Key, error) {
	if len(keys) == 0 {
		return nil, errNoKeys
	}
	first := keys[0]
	for _, k := range keys[1:] {
		if k.pair != first.pair || k.pair && k.hi != first.hi {
			return nil, fmt.Errorf("%w: %s %s and %s: want bigint keys, or pairs with one first integer", ErrBadKey, op, first, k)
		}
	}
	if k, ok := repeated(keys); ok {
		return nil, fmt.Errorf("%w: %s: %s given twice", ErrBadKey, op, k)
	}
	return sqltext.KeysOf(keys), nil
}

// repeated returns a key that keys holds twice, if any.
func repeated(keys []Key) (Key, bool) {
	const few = 32 // below this, comparing costs less than a map
	if len(keys) <= few {
		for i, k := range keys {
			for _, o := range keys[:i] {
				if k == o {
					return k, true
				}
			}
		}
		return Key{}, false
	}
	seen := make(map[Key]struct{}, len(keys))
	for _, k := range keys {
		if _, ok := seen[k]; ok {
			return k, true
		}
		seen[k] = struct{}{}
	}
	return Key{}, false
}
