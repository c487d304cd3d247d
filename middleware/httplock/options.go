package httplock

import (
	"database/sql"
	"fmt"
	"net/http"
	"time"

	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// An Option changes how [XactLock] and [Idempotent] take their lock, end
// their transaction and answer failures. Both accept every Option, and
// every Option is also an [IdempotentOption].
type Option interface {
	IdempotentOption
	xactLockOption()
}

// An IdempotentOption configures [Idempotent]: an [Option], or one of the
// options of Idempotent alone, [IdempotencyTable], [MaxResponseBytes],
// [IdempotentMethods], [RequireIdempotencyKey] and [IdempotencyScope],
// which [XactLock] does not accept.
type IdempotentOption interface {
	apply(*options)
	idempotentOption()
}

// The concrete options, one type per set of middlewares an option
// applies to.
type (
	option     func(*options) // XactLock and Idempotent
	idemOption func(*options) // Idempotent only
)

func (f option) apply(o *options) { f(o) }
func (option) xactLockOption()    {}
func (option) idempotentOption()  {}

func (f idemOption) apply(o *options) { f(o) }
func (idemOption) idempotentOption()  {}

// options are the settings that the options of one middleware set.
type options struct {
	reqlock.Config
	commit    func(status int) bool
	onError   func(w http.ResponseWriter, r *http.Request, err error)
	responses []response
	idem      idemOptions // set by IdempotentOptions alone
}

// Wait makes the middleware wait up to d for a lock that another request
// holds, instead of answering 409 Conflict at once. The server enforces the
// bound ([advisory.Wait]); a wait that runs out, or that a shorter
// statement_timeout of the server cancels, is answered as a busy lock,
// 409 Conflict with Retry-After. The request's context can end the
// wait sooner: its deadline is answered 503 Service Unavailable, a client
// that goes away gets nothing. Wait(0) does not wait, which is the
// default. Of several Wait options, the last one counts.
//
// Wait panics if d is negative or longer than the server's limit of
// math.MaxInt32 milliseconds.
func Wait(d time.Duration) Option {
	reqlock.CheckWait("httplock", d)
	return option(func(o *options) { o.Wait = d })
}

// RetryAfter sets the Retry-After header that comes with a 409 Conflict for
// a busy lock, rounded up to whole seconds. The default is one second;
// RetryAfter(0) sends no header.
//
// RetryAfter panics if d is negative.
func RetryAfter(d time.Duration) Option {
	reqlock.CheckRetryAfter("httplock", d)
	return option(func(o *options) { o.RetryAfter = d })
}

// TxOptions sets the isolation level and read-only flag of the request's
// transaction. A nil opts keeps the database's defaults.
func TxOptions(opts *sql.TxOptions) Option {
	return option(func(o *options) { o.TxOptions = opts })
}

// CommitPolicy replaces the rule that decides, from the status of the
// handler's response, whether its transaction commits (commit returns true)
// or rolls back. The default commits below 400. To commit on 2xx only:
//
//	httplock.CommitPolicy(func(status int) bool { return status >= 200 && status < 300 })
//
// A handler that writes nothing is judged as status 200, and one that
// hijacks the connection as status 101.
//
// CommitPolicy panics if commit is nil.
func CommitPolicy(commit func(status int) bool) Option {
	if commit == nil {
		panic("httplock: CommitPolicy: nil func")
	}
	return option(func(o *options) { o.commit = commit })
}

// ErrorHandler replaces the default answer to every failure the middleware
// itself handles: a key error (matching [ErrBadKey]), a busy lock
// (advisory.ErrNotAcquired, advisory.ErrLockTimeout), the end of the
// request's context (context.Canceled, context.DeadlineExceeded), an
// unreachable database ([ErrUnavailable]), a failed commit ([ErrCommit])
// and any other error. h writes the whole response, Retry-After included;
// [ErrorResponse] and [RetryAfter] no longer apply. The request h gets
// carries no transaction, and the error is the place to log the cause.
//
// h must answer with an error status, and the middleware makes sure of
// it: a status below 400 is sent as 500 Internal Server Error, and so is
// a response h leaves unwritten. After a failed commit, a success would
// tell the client that work was done which was rolled back.
//
// ErrorHandler panics if h is nil.
func ErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	if h == nil {
		panic("httplock: ErrorHandler: nil func")
	}
	return option(func(o *options) { o.onError = h })
}

// ErrorResponse sets the status and the plain-text body that the default
// error handler sends for errors matching target (with errors.Is), such as
// advisory.ErrNotAcquired, [ErrBadKey], [ErrUnavailable], [ErrCommit],
// context.DeadlineExceeded, or any error the lock can fail with, such as
// advisory.ErrDeadlock. A nil target sets the answer to every error that
// no other target matches. An empty body sends the status alone. Later
// options override earlier ones. The defaults are in the package
// documentation's Failures section.
//
// A busy lock gets its Retry-After header whatever status it is given.
//
// ErrorResponse panics if status is not in the range 400 to 599.
func ErrorResponse(target error, status int, body string) Option {
	if status < 400 || status > 599 {
		panic(fmt.Sprintf("httplock: ErrorResponse: status %d is not an error status (400-599)", status))
	}
	return option(func(o *options) { o.responses = append(o.responses, response{target, status, body}) })
}

// newOptions applies opts, in order, over the defaults; nil options are
// skipped.
func newOptions[O IdempotentOption](opts []O) *options {
	o := &options{
		Config: reqlock.NewConfig(),
		commit: func(status int) bool { return status < 400 },
		idem:   newIdemOptions(),
	}
	for _, opt := range opts {
		if any(opt) != nil {
			opt.apply(o)
		}
	}
	if o.onError == nil {
		o.onError = o.respond
	}
	return o
}
