package semaphore

// Rang makes the semaphore call f after each ring with the number of
// waiters the ring woke and its error, from the ring's goroutine.
func Rang(f func(woken int64, err error)) Option { return func(o *options) { o.rang = f } }

// Trace makes the semaphore call f at each step of its waits and rings.
func Trace(f func(event string)) Option { return func(o *options) { o.trace = f } }
