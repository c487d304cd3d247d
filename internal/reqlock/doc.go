// Package reqlock holds what package middleware and package
// middleware/grpclock share: the lock settings and their checks, the run
// of a request inside advisory.WithXactLock, the classes of failure, and
// the parsing of ids from request values.
//
// It imports the standard library and advisory only, so that middleware
// keeps that promise.
package reqlock
