package advisoryotel

import "time"

// SetClock makes o read the time from now, before o is first used.
func SetClock(o *Observer, now func() time.Time) { o.now = now }

// Tracked returns how many grants o remembers for the hold duration, of
// each level.
func Tracked(o *Observer) (session, xact int) { return o.holds.len() }
