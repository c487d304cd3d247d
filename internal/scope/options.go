package scope

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Options are the settings of a call that takes a lock, as advisory's
// options set them.
type Options struct {
	Try     bool          // give up at once when the key is held: Try, or Wait(0)
	Bounded bool          // Wait(d) with d other than 0 was given last
	Timeout time.Duration // the bound, when Bounded
	Shared  bool          // a shared lock rather than an exclusive one
	TxOpts  *sql.TxOptions
	Slice   time.Duration // WaitSlice: the longest statement of a wait; 0 is DefaultSlice
	Sliced  bool          // WaitSlice was given

	Heartbeat time.Duration // a lease's heartbeat interval; 0 is DefaultHeartbeat
	Watched   bool          // Heartbeat was given: a session scope runs as a lease
	Fencing   bool          // a lease takes a fencing token

	Hooks Hooks // observe this call with these rather than the default

	// Spare opens sessions of the pool a lease's session came from, when
	// the lease took it from one: after a loss for want of an answer, the
	// lease undoes its lock through another of the pool's sessions (see
	// [Lease.reclaimFrom]). Nil for a lease on a caller's connection.
	Spare SessionSource
}

// HeartbeatInterval returns the lease's heartbeat interval.
func (o *Options) HeartbeatInterval() time.Duration {
	if o.Heartbeat > 0 {
		return o.Heartbeat
	}
	return DefaultHeartbeat
}

// optionsPool holds the Options that Parse applies options to.
var optionsPool = sync.Pool{New: func() any { return new(Options) }}

// ErrBadOption is wrapped by every error about an option's value.
var ErrBadOption = errors.New("advisory: bad option")

// ApplyOption applies opt, one of advisory's options, to o, and reports
// whether opt was one. Package advisory sets it, for the packages that
// take its options for calls they mirror (mock) or wrap (sqlxlock).
var ApplyOption func(opt any, o *Options) bool

// ParseOf applies opts, advisory's options, as [Parse] does, through
// [ApplyOption].
func ParseOf[O any](opts []O) (Options, error) {
	return Parse(opts, func(opt O, o *Options) { ApplyOption(opt, o) })
}

// Parse applies opts, in order, with apply, to the zero Options and
// checks the result. Nil options are skipped.
func Parse[O any](opts []O, apply func(O, *Options)) (Options, error) {
	var o Options
	if len(opts) > 0 {
		// An option is a function of a pointer, which the compiler must
		// assume it keeps: applied to a pooled Options rather than to o,
		// they cost no allocation per call.
		p := optionsPool.Get().(*Options) // zero: it is put back zeroed
		for _, opt := range opts {
			if any(opt) != nil {
				apply(opt, p)
			}
		}
		o = *p
		*p = Options{} // drop the references it holds
		optionsPool.Put(p)
	}
	return o, o.Check()
}

// Check reports an error for a setting out of range.
func (o *Options) Check() error {
	switch {
	case o.Bounded && o.Timeout < 0:
		return fmt.Errorf("%w: Wait(%v) must not be negative", ErrBadOption, o.Timeout)
	case o.TimeoutMillis() > math.MaxInt32:
		return fmt.Errorf("%w: Wait(%v) exceeds the server's limit of %d ms", ErrBadOption, o.Timeout, math.MaxInt32)
	case o.Sliced && o.Slice < time.Millisecond:
		return fmt.Errorf("%w: WaitSlice(%v) must be at least a millisecond", ErrBadOption, o.Slice)
	case o.Slice > math.MaxInt32*time.Millisecond:
		return fmt.Errorf("%w: WaitSlice(%v) exceeds the server's limit of %d ms", ErrBadOption, o.Slice, math.MaxInt32)
	case o.Watched && o.Heartbeat < time.Millisecond:
		return fmt.Errorf("%w: Heartbeat(%v) must be at least a millisecond", ErrBadOption, o.Heartbeat)
	}
	return nil
}

// SliceLength returns the longest one statement of a wait may run.
func (o *Options) SliceLength() time.Duration {
	if o.Slice > 0 {
		return o.Slice
	}
	return DefaultSlice
}

// TimeoutMillis rounds the timeout up to whole milliseconds, the unit of
// lock_timeout.
func (o *Options) TimeoutMillis() int64 {
	return int64((o.Timeout + time.Millisecond - 1) / time.Millisecond)
}

// LockOp names the operation that takes a lock as o says, in a
// transaction (xact) or a session, for errors and observers.
func (o *Options) LockOp(xact bool) string {
	return lockOps[b2i(o.Try)][b2i(xact)][b2i(o.Shared)]
}

// LockStatement returns the first statement that takes one key as o says,
// in a transaction (xact) or a session, in form f (see [ConnForm]), for a
// caller that holds no lease on the session, and the operation's name. It
// is a try, for a wait as well: an uncontended wait ends with it, and a
// busy key is then waited for in slices (see [Take] and [XactTake]).
func (o *Options) LockStatement(f sqltext.Form, xact bool, key sqltext.Key) (op string, stmt sqltext.Stmt) {
	return o.LockOp(xact), sqltext.TryLockStmt(f, sqltext.Guarded, xact, o.Shared, key)
}

// lockOps names the operations that take a lock, by whether they try,
// whether the lock is a transaction's, and whether it is shared.
var lockOps = [2][2][2]string{
	{{"lock", "lock shared"}, {"xact lock", "xact lock shared"}},
	{{"try lock", "try lock shared"}, {"try xact lock", "try xact lock shared"}},
}

// b2i is 1 for true and 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// UnlockOp names the release of a session lock taken as o says.
func (o *Options) UnlockOp() string {
	if o.Shared {
		return "unlock shared"
	}
	return "unlock"
}

// EndStatement returns the statement that ends a session scope on key.
// owned says the scope took its connection for itself, and so releases
// every session lock on it. A scope with a heartbeat holds its lock as a
// lease on backend pid, which bears mark: it ends as a lease does
// ([sqltext.LeaseEnd]), acting on that backend alone, so that a statement
// that a transaction pooler routes elsewhere releases nothing of another
// client's. Without one (mark 0) it ends with [sqltext.EndScope].
func (o *Options) EndStatement(key sqltext.Key, owned bool, pid, mark int64) string {
	if mark != 0 {
		return sqltext.LeaseEnd(pid, mark, o.Shared, owned, key)
	}
	return sqltext.EndScope(o.Shared, owned, key)
}
