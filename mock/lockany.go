package mock

import (
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// ExpectTryLockAny expects [advisory.TryLockAny] for keys, in the order
// given, on a session that bears no lease's mark, and answers that it
// took keys[took], or with took -1 that every key is taken. Chain
// WillReturnError to make the statement fail instead.
func ExpectTryLockAny(m sqlmock.Sqlmock, took int, keys ...advisory.Key) *sqlmock.ExpectedQuery {
	sk, ok := anyArgs(m, "ExpectTryLockAny", took, keys)
	if !ok {
		return detachedQuery()
	}
	q := sqltext.TryAny(sqltext.Inline, sqltext.Guarded, sk).Query
	return m.ExpectQuery(pattern(m, q)).WithoutArgs().WillReturnRows(sqlmock.NewRows([]string{"o"}).AddRow(int64(took + 1)))
}

// ExpectLockAnyWithin expects [advisory.LockAnyWithin] for d and keys, in
// the order given, on a session that bears no lease's mark, and answers
// that it took keys[took]. Chain WillReturnError to make the statement
// fail instead: an error whose SQLState() is 55P03 is a wait that ran
// out.
func ExpectLockAnyWithin(m sqlmock.Sqlmock, d time.Duration, took int, keys ...advisory.Key) *sqlmock.ExpectedQuery {
	sk, ok := anyArgs(m, "ExpectLockAnyWithin", took, keys)
	if !ok {
		return detachedQuery()
	}
	if took < 0 {
		misuse(m, "mock: ExpectLockAnyWithin: took %d: a wait answers the key it took", took)
		return detachedQuery()
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	q := sqltext.WaitAny(sqltext.Inline, sqltext.Guarded, sk, ms).Query
	return m.ExpectQuery(pattern(m, q)).WithoutArgs().
		WillReturnRows(sqlmock.NewRows([]string{"set_config", "o"}).AddRow("0", int64(took+1)))
}

// ExpectCancelWaiters expects [advisory.CancelWaiters] for the n keys from
// first, and answers that it signalled woken sessions.
func ExpectCancelWaiters(m sqlmock.Sqlmock, first advisory.Key, n, woken int) *sqlmock.ExpectedQuery {
	if n < 1 {
		misuse(m, "mock: ExpectCancelWaiters: %d keys; advisory sends nothing for fewer than one", n)
		return detachedQuery()
	}
	q := sqltext.SlotRing(sqltext.Inline, arg(first), n).Query
	return m.ExpectQuery(pattern(m, q)).WithoutArgs().WillReturnRows(sqlmock.NewRows([]string{"count"}).AddRow(int64(woken)))
}

// anyArgs renders keys as advisory does for TryLockAny and LockAnyWithin,
// in the order given; it reports a misuse on m and returns false when
// keys is empty or took is not a place in keys, nor -1.
func anyArgs(m sqlmock.Sqlmock, helper string, took int, keys []advisory.Key) ([]sqltext.Key, bool) {
	if len(keys) == 0 {
		misuse(m, "mock: %s needs at least one key; advisory sends nothing without one", helper)
		return nil, false
	}
	if took < -1 || took >= len(keys) {
		misuse(m, "mock: %s: took %d: want -1 or a place in the %d keys", helper, took, len(keys))
		return nil, false
	}
	return sqltext.KeysOf(keys), true
}
