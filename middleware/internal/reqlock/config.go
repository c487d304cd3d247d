package reqlock

import (
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// DefaultRetryAfter is the delay a busy lock's answer suggests unless
// told otherwise.
const DefaultRetryAfter = time.Second

// Config holds the settings that the middleware and the interceptors
// share. The zero value takes the lock without waiting and suggests no
// retry delay; [NewConfig] gives the defaults.
type Config struct {
	// Wait bounds the wait for a busy lock; 0 does not wait.
	Wait time.Duration
	// RetryAfter is the delay a busy lock's answer suggests; 0 suggests
	// none.
	RetryAfter time.Duration
	// TxOptions begins the transaction; nil means the database's
	// defaults.
	TxOptions *sql.TxOptions
}

// NewConfig returns the default settings: no wait, a retry delay of
// [DefaultRetryAfter], default transaction options.
func NewConfig() Config { return Config{RetryAfter: DefaultRetryAfter} }

// CheckWait panics, with a message that starts with pkg, if d cannot be a
// bound on the wait: negative, or longer than the server's lock_timeout
// limit of math.MaxInt32 milliseconds.
func CheckWait(pkg string, d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("%s: Wait(%v): negative duration", pkg, d))
	}
	if d > math.MaxInt32*time.Millisecond {
		panic(fmt.Sprintf("%s: Wait(%v): longer than the server's limit of %d ms", pkg, d, math.MaxInt32))
	}
}

// CheckRetryAfter panics, with a message that starts with pkg, if d is
// negative.
func CheckRetryAfter(pkg string, d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("%s: RetryAfter(%v): negative duration", pkg, d))
	}
}

// LockOptions returns the options that make advisory.WithXactLock take the
// lock as c says: advisory.Wait(c.Wait), which does not wait when c.Wait
// is 0, and advisory.TxOptions when c.TxOptions is set.
func (c Config) LockOptions() []advisory.XactOption {
	opts := []advisory.XactOption{advisory.Wait(c.Wait)}
	if c.TxOptions != nil {
		opts = append(opts, advisory.TxOptions(c.TxOptions))
	}
	return opts
}

// RetryAfterSeconds returns c.RetryAfter rounded up to whole seconds, as
// an HTTP Retry-After header gives it.
func (c Config) RetryAfterSeconds() int64 {
	return int64((c.RetryAfter + time.Second - 1) / time.Second)
}
