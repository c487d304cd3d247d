package scope

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Hooks receive what locks do. Package advisory adapts its Observer to
// them. Every method must be safe for concurrent use, and quick: it runs
// on the caller's goroutine.
type Hooks interface {
	// Acquired reports an attempt to take keys as operation op, which
	// waited wait: whether it took them, or the error.
	Acquired(ctx context.Context, op string, keys []sqltext.Key, wait time.Duration, acquired bool, err error)
	// Released reports a release of keys as operation op, and its error.
	Released(ctx context.Context, op string, keys []sqltext.Key, err error)
	// Lost reports a lease on key that was lost, and why.
	Lost(ctx context.Context, key sqltext.Key, cause error)
}

// hooksBox lets an atomic.Pointer hold an interface.
type hooksBox struct{ h Hooks }

var defaultHooks atomic.Pointer[hooksBox]

// SetDefaultHooks makes h the hooks of every call that names none; nil
// removes them.
func SetDefaultHooks(h Hooks) {
	if h == nil {
		defaultHooks.Store(nil)
		return
	}
	defaultHooks.Store(&hooksBox{h})
}

// DefaultHooks returns the hooks set by SetDefaultHooks, or nil.
func DefaultHooks() Hooks {
	if b := defaultHooks.Load(); b != nil {
		return b.h
	}
	return nil
}

// Observed returns the hooks of a call made with o: its own, or the default.
func (o *Options) Observed() Hooks {
	if o.Hooks != nil {
		return o.Hooks
	}
	return DefaultHooks()
}

// since returns the time from start, or 0 when nothing is observed.
func since(h Hooks, start time.Time) time.Duration {
	if h == nil {
		return 0
	}
	return time.Since(start)
}

// now returns the time, when something is observed.
func now(h Hooks) time.Time {
	if h == nil {
		return time.Time{}
	}
	return time.Now()
}
