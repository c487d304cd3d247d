package scope

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Releases that arrive on a carrier while a statement is in flight there
// go together in the next statement: one round trip for all their keys.
// Each Release returns its own result: one whose ctx ended while it
// waited still releases, and one whose key the session no longer held
// reports the loss.
func TestMuxReleasesBatch(t *testing.T) {
	tests := []struct {
		name    string
		answers []int64 // the batch's answer for keys 2, 3 and 4
		lost    []bool  // which of them Release reports lost
	}{
		{"all held", []int64{1, 1, 1}, []bool{false, false, false}},
		{"one not held", []int64{1, 0, 1}, []bool{false, true, false}},
		{"elsewhere", []int64{2, 2, 2}, []bool{true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mx, m, done := newMock(t)
			defer done()
			ctx := context.Background()
			keys := []sqltext.Key{{Bigint: 1}, {Bigint: 2}, {Pair: true, A: 3, B: -3}, {Bigint: 4}}
			shared := []bool{false, false, true, false}
			ls := make([]*MuxLease, len(keys))
			for i, k := range keys {
				if shared[i] {
					m.ExpectQuery(sqltext.CarrierTryFenced(sqltext.Inline, 7, 9, true, k).Query).
						WillReturnRows(sqlmock.NewRows([]string{"t"}).AddRow(int64(5)))
				} else {
					m.ExpectExec(sqltext.CarrierTry(7, 9, false, k)).WillReturnResult(sqlmock.NewResult(0, 2))
				}
				l, err := mx.Acquire(ctx, k, &Options{Shared: shared[i], Fencing: shared[i]})
				if err != nil {
					t.Fatal(err)
				}
				ls[i] = l
			}
			c := ls[0].c
			// Key 1's unlock is in flight while the others arrive.
			m.ExpectExec(sqltext.CarrierUnlock(7, 9, false, keys[0])).WillDelayFor(300 * time.Millisecond).
				WillReturnResult(sqlmock.NewResult(0, 1))
			rows := sqlmock.NewRows([]string{"i", "r"})
			for i, n := range tt.answers {
				rows.AddRow(int64(i+1), n)
			}
			m.ExpectQuery(sqltext.CarrierUnlockBatch(sqltext.Inline, 7, 9, keys[1:], shared[1:]).Query).WillReturnRows(rows)
			if a := tt.answers; a[0] != 1 || a[1] != 1 || a[2] != 1 {
				// The carrier is lost: its session is undone.
				m.ExpectExec(sqltext.CarrierRelease(7, 9)).WillReturnResult(sqlmock.NewResult(0, 1))
			}
			errs := make([]chan error, len(keys))
			release := func(i int, ctx context.Context) {
				errs[i] = make(chan error, 1)
				go func() { errs[i] <- ls[i].Release(ctx) }()
			}
			release(0, ctx)
			awaitTurnHeld(t, c)
			cctx, cancel := context.WithCancel(ctx)
			for i := 1; i < len(keys); i++ {
				rctx := ctx
				if i == 2 {
					rctx = cctx // ends while it waits
				}
				release(i, rctx)
				pgtest.Await(t, "the release to queue", func() (bool, error) {
					c.qmu.Lock()
					defer c.qmu.Unlock()
					return len(c.queued) == i, nil
				})
			}
			cancel()
			if err := <-errs[0]; err != nil {
				t.Errorf("Release of key 1 = %v", err)
			}
			for i := 1; i < len(keys); i++ {
				err := <-errs[i]
				if lost := errors.Is(err, ErrLockLost); lost != tt.lost[i-1] || !lost && err != nil {
					t.Errorf("Release of %v = %v; want lost %v", keys[i], err, tt.lost[i-1])
				}
				if ls[i].Err() == nil {
					t.Errorf("lease on %v still holds after its Release", keys[i])
				}
			}
			pgtest.Await(t, "every statement", func() (bool, error) { return m.ExpectationsWereMet() == nil, nil })
			mx.mu.Lock()
			held := len(mx.held)
			mx.mu.Unlock()
			if held != 0 {
				t.Errorf("the Mux still holds %d keys after every Release", held)
			}
		})
	}
}

// A lone release on an idle carrier sends the single-key unlock.
func TestMuxLoneReleaseSendsOneUnlock(t *testing.T) {
	mx, m, done := newMock(t)
	defer done()
	ctx := context.Background()
	k := sqltext.Key{Bigint: 1}
	m.ExpectExec(sqltext.CarrierTry(7, 9, false, k)).WillReturnResult(sqlmock.NewResult(0, 2))
	l, err := mx.Acquire(ctx, k, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.ExpectExec(sqltext.CarrierUnlock(7, 9, false, k)).WillReturnResult(sqlmock.NewResult(0, 1))
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
