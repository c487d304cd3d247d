package scope

import (
	"context"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A MuxSource is the pool a [Mux] holds its leases on. Beyond opening
// sessions, for the Mux's carriers, for its waits, and for undoing a lost
// carrier's locks from another session, it names the engine that serves
// them, which the Mux checks before each acquisition, since it takes no
// session of its own for a try on a carrier it has, and the form its
// statements take there.
type MuxSource interface {
	SessionSource
	// Engine returns the engine that serves the pool's sessions, which
	// the front end identifies once per pool, or the probe's error; nil
	// and a nil error leave the locks unchecked.
	Engine(ctx context.Context) (*Engine, error)
	// Form returns the form of statement the pool's sessions run
	// fastest.
	Form() sqltext.Form
}

// checkPool refuses a session (xact false) or transaction lock, for
// operation op on keys, on the sessions of src when the engine behind
// them cannot make it real, or reports the probe's failure.
func checkPool(ctx context.Context, src MuxSource, xact bool, op, keys string) error {
	e, err := src.Engine(ctx)
	if e == nil && err == nil {
		return nil // unchecked: see MuxSource.Engine
	}
	return check(ctx, e, err, xact, op, keys)
}
