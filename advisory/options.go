package advisory

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// An Option changes how the scoped helpers ([WithXactLock],
// [WithXactLockTx], [WithSessionLock], [WithSessionLockConn]) take their
// lock. By default they wait for an exclusive lock for as long as ctx
// allows.
type Option func(*options)

type options struct {
	try     bool
	bounded bool // Timeout was given
	timeout time.Duration
	shared  bool
	txOpts  *sql.TxOptions
}

// Try makes the helper give up at once, with an error matching
// [ErrNotAcquired], when another session holds the key. fn is not called.
func Try() Option { return func(o *options) { o.try = true } }

// Timeout bounds the wait for the lock to d, enforced by the server with
// lock_timeout; a wait that runs out returns an error matching
// [ErrLockTimeout]. It costs no extra round trip: the statement that takes
// the lock sets the bound and puts the previous setting back, so no later
// statement, in fn or on the pooled session, sees it. d must be positive
// and at most math.MaxInt32 milliseconds; it is rounded up to whole
// milliseconds. ctx can still end the wait sooner.
func Timeout(d time.Duration) Option {
	return func(o *options) { o.bounded, o.timeout = true, d }
}

// Shared takes a shared lock instead of an exclusive one. Shared locks on a
// key coexist with each other and exclude exclusive ones.
func Shared() Option { return func(o *options) { o.shared = true } }

// TxOptions sets the isolation level and read-only flag of the transaction
// that [WithXactLock] begins. [WithXactLockTx], whose transaction is begun
// already, and the session helpers ignore it.
func TxOptions(opts *sql.TxOptions) Option { return func(o *options) { o.txOpts = opts } }

// errBadOption is wrapped by every error about an option's value.
var errBadOption = errors.New("advisory: bad option")

func newOptions(opts []Option) (*options, error) {
	o := &options{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	switch {
	case o.bounded && o.timeout <= 0:
		return nil, fmt.Errorf("%w: Timeout(%v) must be positive", errBadOption, o.timeout)
	case o.timeoutMillis() > math.MaxInt32:
		return nil, fmt.Errorf("%w: Timeout(%v) exceeds the server's limit of %d ms", errBadOption, o.timeout, math.MaxInt32)
	case o.try && o.bounded:
		return nil, fmt.Errorf("%w: Try and Timeout cannot be combined", errBadOption)
	}
	return o, nil
}

// timeoutMillis rounds the timeout up to whole milliseconds, the unit of
// lock_timeout.
func (o *options) timeoutMillis() int64 {
	return int64((o.timeout + time.Millisecond - 1) / time.Millisecond)
}

// lockStatement returns the statement that takes key as o says, and the
// name of the operation for errors.
func (o *options) lockStatement(xact bool, key Key) (op, stmt string) {
	op = "lock"
	if xact {
		op = "xact lock"
	}
	if o.try {
		op = "try " + op
	}
	if o.shared {
		op += " shared"
	}
	switch {
	case o.try:
		return op, sqltext.TryLock(xact, o.shared, key.sql())
	case o.bounded:
		return op, sqltext.LockTimeout(xact, o.shared, key.sql(), o.timeoutMillis())
	}
	return op, sqltext.Lock(xact, o.shared, key.sql())
}
