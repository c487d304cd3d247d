package scope

import (
	"context"
	"time"
)

// OutlivedTimeout bounds work that goes on once the call that started it
// has given up on it: a carrier's opening ([Mux.open]) and the probe of a
// *sql.DB's engine ([probeDB]).
const OutlivedTimeout = 30 * time.Second

// outlived returns a context for such work: ctx's values, not its
// cancellation, and an end OutlivedTimeout away.
func outlived(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), OutlivedTimeout)
}

// An opening is a carrier being opened for an acquisition. Its fields
// are guarded by the Mux's mu.
type opening struct {
	done      chan struct{} // closed once c and err are set
	c         *carrier
	err       error
	abandoned bool // the acquisition gave up waiting for it
}

// open opens a carrier for an acquisition under ctx, with m.opening and
// m.openers already counting it, and returns it with the acquisition counted as
// pending on it. The opening runs on its own, bounded by OutlivedTimeout and
// by Close but not by ctx: when ctx ends first, the acquisition fails,
// and the carrier, once open, serves the next one. Connecting can take
// longer than an acquisition's deadline on a loaded server; if each
// acquisition's end cut its opening short, no carrier would ever open,
// since the acquisitions that wait for an opening are the ones with the
// least time left when it fails.
func (m *Mux) open(ctx context.Context) (*carrier, error) {
	o := &opening{done: make(chan struct{})}
	octx, cancel := outlived(ctx)
	stop := context.AfterFunc(m.closing, cancel)
	go func() {
		defer m.openers.Done()
		defer cancel()
		defer stop()
		m.finishOpen(octx, o)
	}()
	select {
	case <-o.done:
		return o.c, o.err
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-o.done:
		// It opened as ctx ended, and counts this acquisition.
		return o.c, o.err
	default:
		o.abandoned = true
		return nil, Fail(ctx, "lease", "", ctx.Err())
	}
}

// finishOpen opens o's carrier under ctx and adds it to the Mux, counting
// o's acquisition as pending on it unless that was abandoned. Once Close
// has begun, the opening fails with ErrLockerClosed, and a carrier that
// opened all the same is closed again.
func (m *Mux) finishOpen(ctx context.Context, o *opening) {
	c, err := m.openCarrier(ctx)
	m.mu.Lock()
	m.opening--
	closed := m.closed // which also ends the opening
	switch {
	case closed:
		err = FailKind("lease", "", ErrLockerClosed, nil)
	case err == nil:
		m.carriers = append(m.carriers, c)
		if !o.abandoned {
			c.pending++
		}
	}
	if err != nil {
		o.err = err
	} else {
		o.c = c
	}
	close(o.done)
	m.signalLocked()
	m.mu.Unlock()
	if closed && c != nil {
		_ = c.close(context.Background())
	}
}
