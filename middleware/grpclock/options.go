package grpclock

import (
	"database/sql"
	"time"

	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// An Option changes how [UnaryServerInterceptor] and
// [StreamServerInterceptor] take their lock and report a busy one. Both
// take every Option.
type Option interface {
	apply(*options)
}

// option is the concrete Option.
type option func(*options)

func (f option) apply(o *options) { f(o) }

// options are the settings that the options of one interceptor set.
type options struct {
	reqlock.Config
}

// Wait makes the interceptor wait up to d for a lock that another call
// holds, instead of failing at once with codes.Aborted. The server
// enforces the bound ([advisory.Wait]); a wait that runs out, or that a
// shorter statement_timeout of the server cancels, fails with
// codes.Aborted too, and the call's deadline can end it sooner, with
// codes.DeadlineExceeded. Wait(0) does not wait, which is the default. Of
// several Wait options, the last one counts.
//
// Wait panics if d is negative or longer than the server's limit of
// math.MaxInt32 milliseconds.
func Wait(d time.Duration) Option {
	reqlock.CheckWait("grpclock", d)
	return option(func(o *options) { o.Wait = d })
}

// RetryAfter sets the delay that an Aborted status for a busy lock
// suggests to the client, in an errdetails.RetryInfo detail. The default
// is one second; RetryAfter(0) sends no detail.
//
// RetryAfter panics if d is negative.
func RetryAfter(d time.Duration) Option {
	reqlock.CheckRetryAfter("grpclock", d)
	return option(func(o *options) { o.RetryAfter = d })
}

// TxOptions sets the isolation level and read-only flag of the call's
// transaction. A nil opts keeps the database's defaults.
func TxOptions(opts *sql.TxOptions) Option {
	return option(func(o *options) { o.TxOptions = opts })
}

// newOptions applies opts, in order, over the defaults; nil options are
// skipped.
func newOptions(opts []Option) *options {
	o := &options{Config: reqlock.NewConfig()}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(o)
		}
	}
	return o
}
