package grpclock

import (
	"database/sql"
	"time"

	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// An Option changes how [UnaryServerInterceptor] and
// [StreamServerInterceptor] take their lock and report a busy one. Both
// take the same options.
type Option func(*options)

type options struct {
	reqlock.Config
}

// Wait makes the interceptor wait up to d for a lock that another call
// holds, instead of failing at once with codes.Aborted. The server
// enforces the bound ([advisory.Wait]); a wait that runs out, or that a
// shorter statement_timeout of the server cancels, fails with
// codes.Aborted too, and the call's deadline can end it sooner, with
// codes.DeadlineExceeded. Wait(0) keeps the default, which does not wait.
//
// Wait panics if d is negative or longer than the server's limit of
// math.MaxInt32 milliseconds.
func Wait(d time.Duration) Option {
	reqlock.CheckWait("grpclock", d)
	return func(o *options) { o.Wait = d }
}

// RetryAfter sets the delay that an Aborted status for a busy lock
// suggests to the client, in an errdetails.RetryInfo detail. The default
// is one second; RetryAfter(0) sends no detail.
//
// RetryAfter panics if d is negative.
func RetryAfter(d time.Duration) Option {
	reqlock.CheckRetryAfter("grpclock", d)
	return func(o *options) { o.RetryAfter = d }
}

// TxOptions sets the isolation level and read-only flag of the call's
// transaction. A nil opts keeps the database's defaults.
func TxOptions(opts *sql.TxOptions) Option {
	return func(o *options) { o.TxOptions = opts }
}

// newOptions applies opts over the defaults.
func newOptions(opts []Option) *options {
	o := &options{Config: reqlock.NewConfig()}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return o
}
