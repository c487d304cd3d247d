package reqlock_test

import (
	"context"
	"database/sql"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
	"github.com/pgadvisory/pgadvisory/mock"
)

func TestChecksPanic(t *testing.T) {
	t.Parallel()
	for name, check := range map[string]func(){
		"NegativeWait":       func() { reqlock.CheckWait("pkg", -time.Nanosecond) },
		"WaitTooLong":        func() { reqlock.CheckWait("pkg", (math.MaxInt32+1)*time.Millisecond) },
		"NegativeRetryAfter": func() { reqlock.CheckRetryAfter("pkg", -time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if s, ok := recover().(string); !ok || !strings.HasPrefix(s, "pkg: ") {
					t.Errorf("panic %q, want one starting with the package name", s)
				}
			}()
			check()
		})
	}
	reqlock.CheckWait("pkg", 0)
	reqlock.CheckWait("pkg", math.MaxInt32*time.Millisecond)
	reqlock.CheckRetryAfter("pkg", 0)
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int64{0: 0, time.Millisecond: 1, time.Second: 1, 2500 * time.Millisecond: 3} {
		if got := (reqlock.Config{RetryAfter: d}).RetryAfterSeconds(); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
	if reqlock.NewConfig().RetryAfter != reqlock.DefaultRetryAfter {
		t.Error("NewConfig does not suggest the default retry delay")
	}
}

// TestLockOptions checks the statements the options make
// advisory.WithXactLock send, through package mock, which asks advisory.
func TestLockOptions(t *testing.T) {
	t.Parallel()
	key := advisory.PairKey(1, 2)
	tests := []struct {
		name string
		c    reqlock.Config
		same []advisory.XactOption
	}{
		{"Try", reqlock.Config{}, []advisory.XactOption{advisory.Try()}},
		{"Wait", reqlock.Config{Wait: 1500 * time.Millisecond}, []advisory.XactOption{advisory.Wait(1500 * time.Millisecond)}},
		{"TxOptionsKeepTry", reqlock.Config{TxOptions: &sql.TxOptions{ReadOnly: true}}, []advisory.XactOption{advisory.Try()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, mock.QueryMatcher(sqlmock.QueryMatcherEqual))
			mock.ExpectWithXactLock(m, key, mock.Commit, tt.same...)
			called, err := reqlock.Run(t.Context(), db, key, tt.c.LockOptions(), func(ctx context.Context, tx *sql.Tx) error { return nil })
			if !called || err != nil {
				t.Errorf("Run = %v, %v", called, err)
			}
		})
	}
}
