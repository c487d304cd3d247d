package pgtest

import (
	"database/sql"
	"testing"
)

// Target is one server and driver that a subtest of [Each] runs on.
type Target struct {
	// Server is the server the subtest runs on.
	Server *Server
	// Driver is the database/sql driver DB uses: DriverPQ, DriverPGX or
	// DriverPGXCancel.
	Driver string
	// DB is opened for the subtest and closed at its cleanup.
	DB *sql.DB
}

// Each runs f in a subtest for every server of [Servers] and every driver of
// [Drivers], named "pg15/pq", "pg15/pgx", "pg17/pq" and so on. Each subtest
// gets its own *sql.DB. Like [Servers], it skips or fails t when no server
// can be had.
func Each(t *testing.T, f func(t *testing.T, tg Target)) {
	t.Helper()
	EachDriver(t, Drivers, f)
}

// EachDriver is [Each] with an explicit driver list, for example one that
// adds [DriverPGXCancel].
func EachDriver(t *testing.T, drivers []string, f func(t *testing.T, tg Target)) {
	t.Helper()
	for _, s := range Servers(t) {
		for _, d := range drivers {
			// One level, "pg15/pq", so that parallel subtests of
			// every server and driver run together.
			t.Run(s.Name+"/"+d, func(t *testing.T) {
				f(t, Target{Server: s, Driver: d, DB: s.Open(t, d)})
			})
		}
	}
}
