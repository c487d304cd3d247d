package advisory_test

// as returns opts as options of another kind that each of them is, such as
// a []advisory.LockOption as the []advisory.XactOption of WithXactLock: Go
// converts one option, not a slice of them.
func as[T, S any](opts []S) []T {
	out := make([]T, len(opts))
	for i, o := range opts {
		out[i] = any(o).(T)
	}
	return out
}
