// Package reqlock holds what packages middleware/httplock and
// middleware/grpclock share, so that neither imports the other: the lock
// settings and their checks, the run of a request inside
// advisory.WithXactLock, the classes of failure, the classes their own
// ErrNoLock and ErrBadKey match, and the rules for the ids and names their
// key functions read from requests.
//
// It imports the standard library and advisory only, so that httplock
// keeps that promise.
package reqlock
