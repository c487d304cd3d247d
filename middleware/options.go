package middleware

import (
	"database/sql"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// An Option changes how [XactLock] takes its lock, ends its transaction and
// answers failures.
type Option func(*options)

type options struct {
	wait       time.Duration
	retryAfter time.Duration
	txOpts     *sql.TxOptions
	commit     func(status int) bool
	onError    func(w http.ResponseWriter, r *http.Request, err error)
	responses  []response
}

// Wait makes the middleware wait up to d for a lock that another request
// holds, instead of answering 409 Conflict at once. The server enforces the
// bound (advisory.Timeout); a wait that runs out is answered as a busy
// lock, 409 Conflict with Retry-After, and the request's context can end it
// sooner. Wait(0) keeps the default, which does not wait.
//
// Wait panics if d is negative or longer than the server's limit of
// math.MaxInt32 milliseconds.
func Wait(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("middleware: Wait(%v): negative duration", d))
	}
	if d > math.MaxInt32*time.Millisecond {
		panic(fmt.Sprintf("middleware: Wait(%v): longer than the server's limit of %d ms", d, math.MaxInt32))
	}
	return func(o *options) { o.wait = d }
}

// RetryAfter sets the Retry-After header that comes with a 409 Conflict for
// a busy lock, rounded up to whole seconds. The default is one second;
// RetryAfter(0) sends no header.
//
// RetryAfter panics if d is negative.
func RetryAfter(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("middleware: RetryAfter(%v): negative duration", d))
	}
	return func(o *options) { o.retryAfter = d }
}

// TxOptions sets the isolation level and read-only flag of the request's
// transaction.
func TxOptions(opts *sql.TxOptions) Option {
	return func(o *options) { o.txOpts = opts }
}

// CommitPolicy replaces the rule that decides, from the status of the
// handler's response, whether its transaction commits (commit returns true)
// or rolls back. The default commits below 400. To commit on 2xx only:
//
//	middleware.CommitPolicy(func(status int) bool { return status >= 200 && status < 300 })
//
// A handler that writes nothing is judged as status 200, and one that
// hijacks the connection as status 101.
//
// CommitPolicy panics if commit is nil.
func CommitPolicy(commit func(status int) bool) Option {
	if commit == nil {
		panic("middleware: CommitPolicy: nil func")
	}
	return func(o *options) { o.commit = commit }
}

// ErrorHandler replaces the default answer to every failure the middleware
// itself handles: a key error (matching [ErrBadKey]), a busy lock
// (advisory.ErrNotAcquired, advisory.ErrLockTimeout), an unreachable
// database ([ErrUnavailable]), a failed commit ([ErrCommit]) and any other
// error. h writes the whole response, Retry-After included; [ErrorResponse]
// and [RetryAfter] no longer apply. The request h gets carries no
// transaction. h must send an error status: after a failed commit, a 2xx
// would tell the client that work succeeded which was rolled back.
//
// ErrorHandler panics if h is nil.
func ErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	if h == nil {
		panic("middleware: ErrorHandler: nil func")
	}
	return func(o *options) { o.onError = h }
}

// ErrorResponse sets the status and the plain-text body that the default
// error handler sends for errors matching target (with errors.Is), such as
// advisory.ErrNotAcquired, [ErrBadKey], [ErrUnavailable], [ErrCommit], or
// any error the lock can fail with, such as advisory.ErrDeadlock. A nil
// target sets the answer to every error that no other target matches.
// Later options override earlier ones. The defaults are:
//
//	ErrBadKey                400 Bad Request
//	advisory.ErrNotAcquired  409 Conflict, with Retry-After
//	advisory.ErrLockTimeout  409 Conflict, with Retry-After
//	ErrUnavailable           503 Service Unavailable
//	ErrCommit                500 Internal Server Error
//	anything else            500 Internal Server Error
//
// A busy lock gets its Retry-After header whatever status it is given.
//
// ErrorResponse panics if status is not in the range 400 to 599.
func ErrorResponse(target error, status int, body string) Option {
	if status < 400 || status > 599 {
		panic(fmt.Sprintf("middleware: ErrorResponse: status %d is not an error status (400-599)", status))
	}
	return func(o *options) { o.responses = append(o.responses, response{target, status, body}) }
}

// newOptions applies opts over the defaults.
func newOptions(opts []Option) *options {
	o := &options{
		retryAfter: time.Second,
		commit:     func(status int) bool { return status < 400 },
	}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	if o.onError == nil {
		o.onError = o.respond
	}
	return o
}

// lockOptions returns what advisory.WithXactLock needs to know.
func (o *options) lockOptions() []advisory.Option {
	opts := []advisory.Option{advisory.Try()}
	if o.wait > 0 {
		opts[0] = advisory.Timeout(o.wait)
	}
	if o.txOpts != nil {
		opts = append(opts, advisory.TxOptions(o.txOpts))
	}
	return opts
}

// retryAfterSeconds rounds the Retry-After delay up to whole seconds.
func (o *options) retryAfterSeconds() int64 {
	return int64((o.retryAfter + time.Second - 1) / time.Second)
}
