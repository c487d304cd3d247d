package mock

import (
	"slices"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Each helper below expects the one statement its advisory function sends
// through ExecContext, without arguments, and answers it with the number of
// rows the server would report, which is how advisory reads every boolean
// answer. The statements are built by internal/sqltext, as advisory builds
// them.

// ExpectLock expects [advisory.Lock] on key, and grants it at once: a
// wait for a free key is the one statement that tries it. (A busy key is
// then waited for in slices, statements whose number depends on time.)
func ExpectLock(m sqlmock.Sqlmock, key advisory.Key) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, false, false, arg(key)), 1)
}

// ExpectLockShared expects [advisory.LockShared] on key, and grants it at
// once, as [ExpectLock] does.
func ExpectLockShared(m sqlmock.Sqlmock, key advisory.Key) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, false, true, arg(key)), 1)
}

// ExpectTryLock expects [advisory.TryLock] on key, answering whether the
// lock was acquired.
func ExpectTryLock(m sqlmock.Sqlmock, key advisory.Key, acquired bool) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, false, false, arg(key)), count(acquired))
}

// ExpectTryLockShared expects [advisory.TryLockShared] on key, answering
// whether the lock was acquired.
func ExpectTryLockShared(m sqlmock.Sqlmock, key advisory.Key, acquired bool) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, false, true, arg(key)), count(acquired))
}

// ExpectLockKeys expects [advisory.LockKeys] on keys, in any order and with
// any duplicates, as the call passes them, and grants them all in the
// first slice of its wait. It reports a misuse (see the package
// documentation) when keys is empty: LockKeys then fails without sending
// anything.
func ExpectLockKeys(m sqlmock.Sqlmock, keys ...advisory.Key) *sqlmock.ExpectedExec {
	a, ok := args(m, "ExpectLockKeys", keys)
	if !ok {
		return detachedExec()
	}
	return expect(m, firstWait(false, a), 1)
}

// ExpectUnlock expects [advisory.Unlock] on key, answering whether the
// session held it. With held false, Unlock returns an error matching
// [advisory.ErrNotHeld] and closes the session.
func ExpectUnlock(m sqlmock.Sqlmock, key advisory.Key, held bool) *sqlmock.ExpectedExec {
	return expect(m, sqltext.Unlock(false, arg(key)), count(held))
}

// ExpectUnlockShared expects [advisory.UnlockShared] on key, answering
// whether the session held it, as [ExpectUnlock] does.
func ExpectUnlockShared(m sqlmock.Sqlmock, key advisory.Key, held bool) *sqlmock.ExpectedExec {
	return expect(m, sqltext.Unlock(true, arg(key)), count(held))
}

// ExpectUnlockKeys expects [advisory.UnlockKeys] on keys, in any order and
// with any duplicates, and answers that every one was held. To make some
// missing, chain WillReturnResult(sqlmock.NewResult(0, n)) with n smaller
// than the number of distinct keys. It reports a misuse when keys is
// empty.
func ExpectUnlockKeys(m sqlmock.Sqlmock, keys ...advisory.Key) *sqlmock.ExpectedExec {
	a, ok := args(m, "ExpectUnlockKeys", keys)
	if !ok {
		return detachedExec()
	}
	return expect(m, sqltext.Unlock(false, a...), int64(len(a)))
}

// ExpectUnlockAll expects [advisory.UnlockAll].
func ExpectUnlockAll(m sqlmock.Sqlmock) *sqlmock.ExpectedExec {
	return expect(m, sqltext.UnlockAll, 1)
}

// ExpectXactLock expects [advisory.XactLock] on key, and grants it at
// once, as [ExpectLock] does.
func ExpectXactLock(m sqlmock.Sqlmock, key advisory.Key) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, true, false, arg(key)), 1)
}

// ExpectXactLockShared expects [advisory.XactLockShared] on key, and grants
// it at once, as [ExpectLock] does.
func ExpectXactLockShared(m sqlmock.Sqlmock, key advisory.Key) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, true, true, arg(key)), 1)
}

// ExpectTryXactLock expects [advisory.TryXactLock] on key, answering
// whether the lock was acquired.
func ExpectTryXactLock(m sqlmock.Sqlmock, key advisory.Key, acquired bool) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, true, false, arg(key)), count(acquired))
}

// ExpectTryXactLockShared expects [advisory.TryXactLockShared] on key,
// answering whether the lock was acquired.
func ExpectTryXactLockShared(m sqlmock.Sqlmock, key advisory.Key, acquired bool) *sqlmock.ExpectedExec {
	return expect(m, sqltext.TryLock(sqltext.Guarded, true, true, arg(key)), count(acquired))
}

// ExpectXactLockKeys expects [advisory.XactLockKeys] on keys, in any order
// and with any duplicates, and grants them all in the first slice of its
// wait, which runs under a savepoint. It reports a misuse when keys is
// empty.
func ExpectXactLockKeys(m sqlmock.Sqlmock, keys ...advisory.Key) *sqlmock.ExpectedExec {
	a, ok := args(m, "ExpectXactLockKeys", keys)
	if !ok {
		return detachedExec()
	}
	return expect(m, firstWait(true, a), 1)
}

// firstWait returns the first statement of an exclusive wait for keys
// without options, in a transaction the caller began (xact) or a session:
// the try of a single key, or the first slice of a wait for several.
func firstWait(xact bool, keys []sqltext.Key) string {
	switch {
	case len(keys) == 1:
		return sqltext.TryLock(sqltext.Guarded, xact, false, keys[0])
	case xact:
		return sqltext.InSavepoint(false, sqltext.GuardedXactSlice(sqltext.Guarded, false, firstSlice, keys...))
	}
	return sqltext.SessionSlice(sqltext.Guarded, false, firstSlice, keys...)
}

// firstSlice is the length, in milliseconds, of the first slice of a wait
// without options.
var firstSlice = scope.FirstSliceMillis(&scope.Options{})

// expect lays down an Exec of stmt without arguments that affects rows
// rows.
func expect(m sqlmock.Sqlmock, stmt string, rows int64) *sqlmock.ExpectedExec {
	return m.ExpectExec(pattern(m, stmt)).WithoutArgs().WillReturnResult(sqlmock.NewResult(0, rows))
}

// count is the number of rows that answers yes or no.
func count(yes bool) int64 {
	if yes {
		return 1
	}
	return 0
}

// arg returns key as advisory hands it to the statement builders.
func arg(key advisory.Key) sqltext.Key { return sqltext.KeyOf(key) }

// args renders keys as advisory does for a multi-key statement: sorted by
// [advisory.Key.Compare], duplicates removed; it reports a misuse on m
// and returns false when keys is empty.
func args(m sqlmock.Sqlmock, helper string, keys []advisory.Key) ([]sqltext.Key, bool) {
	if len(keys) == 0 {
		misuse(m, "mock: %s needs at least one key; advisory sends nothing without one", helper)
		return nil, false
	}
	keys = slices.Clone(keys)
	slices.SortFunc(keys, advisory.Key.Compare)
	keys = slices.Compact(keys)
	out := make([]sqltext.Key, len(keys))
	for i, k := range keys {
		out[i] = arg(k)
	}
	return out, true
}
