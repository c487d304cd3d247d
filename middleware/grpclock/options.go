package grpclock

import (
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// An Option changes how [UnaryServerInterceptor] and
// [StreamServerInterceptor] take their lock. Both take the same options.
type Option func(*options)

type options struct {
	wait   time.Duration
	txOpts *sql.TxOptions
}

// Wait makes the interceptor wait up to d for a lock that another call
// holds, instead of failing at once with codes.Aborted. The server
// enforces the bound (advisory.Timeout); a wait that runs out fails with
// codes.Aborted too, and the call's deadline can end it sooner, with
// codes.DeadlineExceeded. Wait(0) keeps the default, which does not wait.
//
// Wait panics if d is negative or longer than the server's limit of
// math.MaxInt32 milliseconds.
func Wait(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("grpclock: Wait(%v): negative duration", d))
	}
	if d > math.MaxInt32*time.Millisecond {
		panic(fmt.Sprintf("grpclock: Wait(%v): longer than the server's limit of %d ms", d, math.MaxInt32))
	}
	return func(o *options) { o.wait = d }
}

// TxOptions sets the isolation level and read-only flag of the call's
// transaction.
func TxOptions(opts *sql.TxOptions) Option {
	return func(o *options) { o.txOpts = opts }
}

// lockOptions applies opts and returns what advisory.WithXactLock needs.
func lockOptions(opts []Option) []advisory.Option {
	o := &options{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	lock := []advisory.Option{advisory.Try()}
	if o.wait > 0 {
		lock[0] = advisory.Timeout(o.wait)
	}
	if o.txOpts != nil {
		lock = append(lock, advisory.TxOptions(o.txOpts))
	}
	return lock
}
