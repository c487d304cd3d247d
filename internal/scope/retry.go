package scope

import (
	"context"
	"errors"
	"time"
)

// reclaimFromWithin bounds how long a lease or a Locker connection goes
// on trying to undo its locks from another session of its pool, after
// its own session could not. Each try is one statement bounded by
// [reclaimTimeout] (or the heartbeat interval, when longer), so on a
// server too loaded to answer one in time, or behind a pooler whose
// backends are all busy, the tries go on for this long.
const reclaimFromWithin = 15 * time.Second

// retryPause is how long [retryWithin] waits between two tries.
const retryPause = 50 * time.Millisecond

// errPoolClosed reports that a session could not be opened because its
// pool is closed, which no later try can change.
var errPoolClosed = errors.New("the connection pool is closed")

// retryWithin calls try until it succeeds, fails with [errPoolClosed],
// ctx ends, or the next try would start after limit has passed, and
// returns the last try's error. try runs at least once, whatever ctx.
func retryWithin(ctx context.Context, limit time.Duration, try func() error) error {
	end := time.Now().Add(limit)
	for {
		err := try()
		if err == nil || errors.Is(err, errPoolClosed) || time.Until(end) < retryPause {
			return err
		}
		t := time.NewTimer(retryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
