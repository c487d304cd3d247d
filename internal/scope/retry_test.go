package scope

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRetryWithin(t *testing.T) {
	t.Parallel()
	failing := errors.New("no answer")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		limit     time.Duration
		succeedAt int // the try that succeeds, 0 for none
		fail      error
		wantTries int
		wantErr   error
	}{
		{"FirstTry", context.Background(), time.Minute, 1, failing, 1, nil},
		{"ThirdTry", context.Background(), time.Minute, 3, failing, 3, nil},
		{"LimitTooShortForASecond", context.Background(), retryPause / 2, 0, failing, 1, failing},
		{"CtxDoneStillTriesOnce", cancelled, time.Minute, 0, failing, 1, failing},
		{"PoolClosedStops", context.Background(), time.Minute, 0, fmt.Errorf("%w: sql: database is closed", errPoolClosed), 1, errPoolClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tries := 0
			err := retryWithin(tt.ctx, tt.limit, func() error {
				tries++
				if tries == tt.succeedAt {
					return nil
				}
				return tt.fail
			})
			if tries != tt.wantTries || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("retryWithin: %d tries, err %v; want %d tries, err %v", tries, err, tt.wantTries, tt.wantErr)
			}
		})
	}
}

func TestClosedPool(t *testing.T) {
	t.Parallel()
	if err := closedPool(errors.New("sql: database is closed")); !errors.Is(err, errPoolClosed) {
		t.Errorf("closedPool(database/sql's closed error) = %v; want errPoolClosed", err)
	}
	other := errors.New("dial tcp: connection refused")
	if err := closedPool(other); err != other {
		t.Errorf("closedPool(%v) = %v; want it unchanged", other, err)
	}
	if err := closedPool(nil); err != nil {
		t.Errorf("closedPool(nil) = %v", err)
	}
}
