package advisory

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// An Observer learns what locks do: each acquisition, each release and
// each lease loss. Attach one to every call with [SetObserver], as log/slog
// does with its default logger, so that code deep in a program is observed
// without passing anything down; override it for one scoped helper or
// lease with [WithObserver]. Its methods run on the caller's goroutine,
// right after the statement, and must be quick and safe for concurrent
// use. [NewSlogObserver] logs the observations.
//
// A transaction lock taken with [XactLock] and its kin ends with its
// transaction, which this package does not see: only the transaction
// scopes report that release.
type Observer interface {
	// ObserveAcquire reports an attempt to take a lock.
	ObserveAcquire(ctx context.Context, a Acquisition)
	// ObserveRelease reports a release: an unlock, the end of a session
	// scope or lease, or the end of a transaction scope.
	ObserveRelease(ctx context.Context, r Release)
	// ObserveLoss reports a lease that was lost, right after its context
	// was cancelled.
	ObserveLoss(ctx context.Context, l Loss)
}

// An Outcome says how an acquisition ended.
type Outcome int

// The outcomes of an acquisition.
const (
	Acquired   Outcome = iota + 1 // the lock was granted
	Busy                          // a try found the key held (ErrNotAcquired)
	TimedOut                      // the wait ran out (ErrLockTimeout)
	Deadlocked                    // the server broke a deadlock (ErrDeadlock)
	Failed                        // any other error, ctx's included
)

// String returns the outcome's name in lower case, "acquired" for example.
func (o Outcome) String() string {
	switch o {
	case Acquired:
		return "acquired"
	case Busy:
		return "busy"
	case TimedOut:
		return "timeout"
	case Deadlocked:
		return "deadlock"
	case Failed:
		return "error"
	}
	return "unknown"
}

// Acquisition is one attempt to take a lock.
type Acquisition struct {
	Op      string        // the operation: "lock", "try xact lock shared", ...
	Keys    []Key         // the keys, in the order they were taken
	Shared  bool          // a shared lock
	Xact    bool          // a transaction lock
	Wait    time.Duration // from sending the statement to its answer
	Outcome Outcome
	Err     error // nil when Outcome is Acquired or Busy
}

// Release is one release of a lock.
type Release struct {
	Op   string // "unlock", "unlock shared", "xact end", ...
	Keys []Key
	Err  error // nil for a clean release; ErrLockLost, ErrNotHeld or the cause otherwise
}

// Loss is a lease that was lost.
type Loss struct {
	Key   Key
	Cause error // what the heartbeat found, or the driver's error
}

// SetObserver makes o observe every lock operation that does not name an
// observer of its own with [WithObserver]; nil stops observing. With none
// set, observing costs one atomic load per operation.
func SetObserver(o Observer) {
	if o == nil {
		scope.SetDefaultHooks(nil)
		return
	}
	scope.SetDefaultHooks(hooks{o})
}

// WithObserver makes o observe a scoped helper or lease, instead of the
// observer of [SetObserver]. The plain lock functions have no options, and
// always use SetObserver's.
func WithObserver(o Observer) LockOption {
	return lockOption(func(so *scope.Options) {
		if o != nil {
			so.Hooks = hooks{o}
		}
	})
}

// hooks adapts an Observer to what package scope reports.
type hooks struct{ o Observer }

func (h hooks) Acquired(ctx context.Context, op string, keys []sqltext.Key, wait time.Duration, acquired bool, err error) {
	a := Acquisition{
		Op: op, Keys: fromSQL(keys), Wait: wait, Err: err,
		Shared: strings.HasSuffix(op, "shared"), Xact: strings.Contains(op, "xact"),
	}
	switch {
	case err == nil && acquired:
		a.Outcome = Acquired
	case err == nil:
		a.Outcome = Busy
	case errors.Is(err, ErrLockTimeout):
		a.Outcome = TimedOut
	case errors.Is(err, ErrDeadlock):
		a.Outcome = Deadlocked
	default:
		a.Outcome = Failed
	}
	h.o.ObserveAcquire(ctx, a)
}

func (h hooks) Released(ctx context.Context, op string, keys []sqltext.Key, err error) {
	h.o.ObserveRelease(ctx, Release{Op: op, Keys: fromSQL(keys), Err: err})
}

func (h hooks) Lost(ctx context.Context, key sqltext.Key, cause error) {
	h.o.ObserveLoss(ctx, Loss{Key: fromSQL([]sqltext.Key{key})[0], Cause: cause})
}

// fromSQL returns keys as Keys.
func fromSQL(keys []sqltext.Key) []Key {
	out := make([]Key, len(keys))
	for i, k := range keys {
		if k.Pair {
			out[i] = PairKey(k.A, k.B)
		} else {
			out[i] = Int64Key(k.Bigint)
		}
	}
	return out
}
