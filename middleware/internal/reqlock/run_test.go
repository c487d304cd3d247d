package reqlock_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
	"github.com/pgadvisory/pgadvisory/mock"
)

func TestRun(t *testing.T) {
	t.Parallel()
	key := advisory.PairKey(1, 2)
	try := []advisory.XactOption{advisory.Try()}
	errFn := errors.New("fn failed")
	tests := []struct {
		name       string
		expect     func(m sqlmock.Sqlmock)
		fnErr      error
		cancelInFn bool
		wantCalled bool
		wantErr    error
	}{
		{"Commit", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.Commit, try...) }, nil, false, true, nil},
		{"FnError", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.Rollback, try...) }, errFn, false, true, errFn},
		{"NotAcquired", func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, key, mock.XactNotAcquired, try...) }, nil, false, false, advisory.ErrNotAcquired},
		{"BeginFails", func(m sqlmock.Sqlmock) { m.ExpectBegin().WillReturnError(sql.ErrConnDone) }, nil, false, false, sql.ErrConnDone},
		{"CommitFails", func(m sqlmock.Sqlmock) {
			mock.ExpectWithXactLock(m, key, mock.Commit, try...).Commit.WillReturnError(errFn)
		}, nil, false, true, errFn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, mock.QueryMatcher(sqlmock.QueryMatcherEqual))
			tt.expect(m)
			called, err := reqlock.Run(context.Background(), db, key, try, func(ctx context.Context, tx *sql.Tx) error {
				if tx == nil {
					t.Error("nil tx")
				}
				return tt.fnErr
			})
			if called != tt.wantCalled || !errors.Is(err, tt.wantErr) {
				t.Errorf("Run = %v, %v; want %v, %v", called, err, tt.wantCalled, tt.wantErr)
			}
		})
	}
}

// endedCtx is a context that reports its end through Err but never closes
// Done, so that database/sql and the driver, which watch Done, go on: it
// stands for a context that ends just before the code under test looks.
type endedCtx struct{ context.Context }

func (endedCtx) Err() error { return context.Canceled }

// endingCtx is an endedCtx that ends when end is called.
type endingCtx struct {
	context.Context
	ended atomic.Bool
}

func (c *endingCtx) end() { c.ended.Store(true) }

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// TestRunContextEndedAtGrant checks that fn is not called when the context
// has ended by the time the lock is granted, and that the transaction
// rolls back.
func TestRunContextEndedAtGrant(t *testing.T) {
	t.Parallel()
	key := advisory.PairKey(1, 2)
	db, m := mock.New(t, mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	mock.ExpectWithXactLock(m, key, mock.XactGranted, advisory.Try())
	m.ExpectRollback()
	called, err := reqlock.Run(endedCtx{context.Background()}, db, key, []advisory.XactOption{advisory.Try()},
		func(context.Context, *sql.Tx) error {
			t.Error("fn called")
			return nil
		})
	if called || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, %v; want false, context.Canceled", called, err)
	}
}

// TestRunContextEndedInFn checks that fn's work is rolled back, not
// committed, when the context ends while fn runs and fn returns nil.
func TestRunContextEndedInFn(t *testing.T) {
	t.Parallel()
	key := advisory.PairKey(1, 2)
	db, m := mock.New(t, mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	mock.ExpectWithXactLock(m, key, mock.Rollback, advisory.Try())
	ctx := &endingCtx{Context: context.Background()}
	called, err := reqlock.Run(ctx, db, key, []advisory.XactOption{advisory.Try()}, func(context.Context, *sql.Tx) error {
		ctx.end()
		return nil
	})
	if !called || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, %v; want true, context.Canceled", called, err)
	}
}
