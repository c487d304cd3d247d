package scope

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// DefaultSlice is the longest one statement of a wait runs, and so the age
// of the oldest snapshot a wait holds, when WaitSlice is not given.
const DefaultSlice = time.Second

// A wait for a busy key runs in slices: statements that each wait at most
// a slice, under lock_timeout, so that no statement holds a snapshot for
// longer (see internal/sqltext's wait.go). A slice that runs out fails
// with SQLSTATE 55P03 and leaves the wait queue; the next one joins it
// again, at its end.
//
// A slice is always a little longer than the session's deadlock_timeout,
// so that the server still looks for a deadlock in each, and never longer
// than
// most of its statement_timeout, which would cancel it. The wait as a whole
// ends when the caller's Timeout runs out, or the session's lock_timeout
// or statement_timeout, counted from its start, as a single statement's
// wait would have: with ErrLockTimeout.

// waitSettings are the session's settings that bound a wait, zero for
// none, and whether a transaction block is open on it.
type waitSettings struct {
	lock, statement, deadlock time.Duration
	inBlock                   bool
}

// readWaitSettings reads the settings that bound a wait on q's session.
func readWaitSettings(ctx context.Context, q Querier) (waitSettings, error) {
	var lock, statement, deadlock string
	var s waitSettings
	if err := q.QueryRow(ctx, sqltext.WaitSettings).Scan(&lock, &statement, &deadlock, &s.inBlock); err != nil {
		return waitSettings{}, err
	}
	var errs [3]error
	s.lock, errs[0] = parseMillis(lock)
	s.statement, errs[1] = parseMillis(statement)
	s.deadlock, errs[2] = parseMillis(deadlock)
	return s, errors.Join(errs[:]...)
}

// parseMillis parses a time setting as current_setting shows one whose
// unit is the millisecond: "0", "250ms", "1s", "5min", "2h", "1d".
func parseMillis(s string) (time.Duration, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '-' })
	if i < 0 {
		i = len(s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	unit, ok := settingUnits[s[i:]]
	if err != nil || !ok || n < 0 {
		return 0, fmt.Errorf("advisory: cannot read the setting %q as a duration", s)
	}
	return time.Duration(n) * unit, nil
}

// settingUnits are the units current_setting shows a time setting in; no
// unit is the setting's own, the millisecond.
var settingUnits = map[string]time.Duration{
	"": time.Millisecond, "ms": time.Millisecond, "s": time.Second,
	"min": time.Minute, "h": time.Hour, "d": 24 * time.Hour,
}

// A slicer plans the slices of one wait.
type slicer struct {
	base     time.Duration // the slice the caller asked for
	slice    time.Duration // the length of a slice
	deadline time.Time     // when the wait ends; zero for never
	bound    string        // what set the deadline, for the error
}

// defaultDeadlockTimeout is PostgreSQL's default deadlock_timeout, which a
// wait's first slice assumes.
const defaultDeadlockTimeout = time.Second

// sliceFor returns the length of a slice for the caller's base and the
// session's deadlock_timeout: base, or a little more than deadlock_timeout
// when base is not longer. The server looks for a deadlock once a wait has
// lasted deadlock_timeout, and a lock_timeout that fires at the same moment
// would report the wait as timed out instead, and the next slice would
// wait in the same deadlock again.
func sliceFor(base, deadlock time.Duration) time.Duration {
	return max(base, deadlock+max(deadlock/10, 100*time.Millisecond))
}

// firstSlicer plans a wait's first slice, before the session's settings
// are known: o's slice (see [sliceFor], for the default deadlock_timeout),
// or less when o's Wait is shorter.
func firstSlicer(start time.Time, o *Options) slicer {
	p := slicer{base: o.SliceLength()}
	p.slice = sliceFor(p.base, defaultDeadlockTimeout)
	if o.Bounded {
		p.deadline, p.bound = start.Add(o.Timeout), "Wait"
	}
	return p
}

// withSettings plans the rest of a wait that started at start, once the
// session's settings s are known.
func (p slicer) withSettings(start time.Time, s waitSettings) slicer {
	p.slice = sliceFor(p.base, s.deadlock)
	if s.statement > 0 {
		p.slice = max(min(p.slice, s.statement-s.statement/10), time.Millisecond)
	}
	for _, b := range []struct {
		d    time.Duration
		name string
	}{{s.lock, "lock_timeout"}, {s.statement, "statement_timeout"}} {
		if b.d <= 0 {
			continue
		}
		if end := start.Add(b.d); p.deadline.IsZero() || end.Before(p.deadline) {
			p.deadline, p.bound = end, "the session's "+b.name
		}
	}
	return p
}

// next returns the length of the next slice, in whole milliseconds, and
// whether the deadline ends it; ms is 0 once the deadline has passed.
func (p slicer) next(now time.Time) (ms int64, last bool) {
	d := p.slice
	if !p.deadline.IsZero() {
		left := p.deadline.Sub(now)
		if left <= 0 {
			return 0, true
		}
		if left <= d {
			d, last = left, true
		}
	}
	return max(int64((d+time.Millisecond-1)/time.Millisecond), 1), last
}

// errWaitBound is the cause of ErrLockTimeout when a wait's deadline
// passed between slices.
type errWaitBound struct{ bound string }

func (e errWaitBound) Error() string { return e.bound + " ran out" }

// waitOutcome is how a wait ended.
type waitOutcome struct {
	err   error // nil when the wait took the keys
	doubt bool  // the session may hold a lock the wait did not report
}

// sliceFunc runs slice n of a wait, of ms milliseconds, and returns its
// error. set are the session's settings, once they are read (zero
// before): its lock_timeout, which a slice in a transaction block puts
// back, and whether one is open.
type sliceFunc func(ctx context.Context, n int, ms int64, set waitSettings) error

// waitInSlices runs the slices of a wait that started at start until one
// takes the keys, the wait's bound runs out, or a slice fails otherwise.
// settings reads the session's settings: with settingsFirst before the
// first slice, which is how a wait for one key starts, after the try that
// found it busy; otherwise after the first slice runs out, which is how a
// wait for several keys starts, so that a free set costs one statement.
// Between two slices the transaction of a slice that ran out may need
// ending first, which slice does. A slice that runs out holds nothing; any
// other failure leaves the session in doubt, since a lock may have been
// granted as it failed.
func waitInSlices(ctx context.Context, start time.Time, o *Options, op, keys string, settingsFirst bool, settings func(context.Context) (waitSettings, error), slice sliceFunc) waitOutcome {
	p := firstSlicer(start, o)
	var ranOut error // the last slice's error, when it ran out
	var set waitSettings
	for n := 0; ; n++ {
		if n == 0 && settingsFirst || n == 1 && !settingsFirst {
			s, err := settings(ctx)
			if err != nil {
				return waitOutcome{err: Fail(ctx, op, keys, err), doubt: true}
			}
			p = p.withSettings(start, s)
			set = s
		}
		now := time.Now()
		if n == 0 && !settingsFirst {
			// A first slice sent before the settings is sent at once:
			// its bound is the whole of the first slice's, which
			// FirstSliceMillis tells, and it runs whatever the bound, as
			// a try would, so that a free key is taken at once.
			now = start
		}
		ms, last := p.next(now)
		if n == 0 && !settingsFirst && ms == 0 {
			ms = 1
		}
		if ms == 0 {
			var cause error = errWaitBound{p.bound}
			if ranOut != nil {
				// The server's own error stays reachable, as it is
				// when the last slice itself runs out.
				cause = fmt.Errorf("%w: %w", cause, ranOut)
			}
			return waitOutcome{err: FailKind(op, keys, ErrLockTimeout, cause)}
		}
		err := slice(ctx, n, ms, set)
		var refused refusedError
		switch {
		case err == nil:
			return waitOutcome{}
		case errors.As(err, &refused):
			// The slice took nothing.
			return waitOutcome{err: refused.err}
		case ctx.Err() != nil:
			// Whatever the statement says (a slice may run out as the
			// driver cancels it), ctx ended the wait, and a cancel may
			// still be in flight.
			return waitOutcome{err: FailKind(op, keys, ctx.Err(), err), doubt: true}
		case SQLState(err) != "55P03":
			return waitOutcome{err: FailWait(ctx, op, keys, err), doubt: true}
		case last:
			return waitOutcome{err: FailKind(op, keys, ErrLockTimeout, err)}
		}
		ranOut = err
	}
}

// FirstSliceMillis returns the length, in milliseconds, of the first slice
// of a wait taken as o says, which the statement of that slice carries.
func FirstSliceMillis(o *Options) int64 {
	now := time.Now()
	ms, _ := firstSlicer(now, o).next(now)
	return max(ms, 1)
}
