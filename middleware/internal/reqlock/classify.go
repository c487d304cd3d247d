package reqlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// Busy reports whether err says that another holder has the lock: a try
// that was refused (advisory.ErrNotAcquired) or a bounded wait that ran
// out (advisory.ErrLockTimeout). Either way the client should retry later.
func Busy(err error) bool {
	return errors.Is(err, advisory.ErrNotAcquired) || errors.Is(err, advisory.ErrLockTimeout)
}

// errDBClosedText is the message of database/sql's unexported error for a
// *sql.DB that has been closed. It cannot be matched with errors.Is, so
// Unavailable matches this exact text, and nothing looser.
const errDBClosedText = "sql: database is closed"

// Unavailable reports whether err says that the database cannot be used
// at the moment, rather than that a statement failed:
//
//   - a broken or closed connection: driver.ErrBadConn, sql.ErrConnDone;
//   - a closed *sql.DB ("sql: database is closed");
//   - a network error (net.Error);
//   - a server error of SQLSTATE class 08 (connection exception), 53300
//     (too_many_connections), or 57P01 to 57P05 (admin or crash shutdown,
//     cannot connect now, database dropped, idle session timeout).
//
// An error that matches context.Canceled or context.DeadlineExceeded is
// never unavailability: the request ended, whatever the database said.
func Unavailable(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded): // which is a net.Error
		return false
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), inChain(err, isDBClosed):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		s := se.SQLState()
		return strings.HasPrefix(s, "08") || s == "53300" || (len(s) == 5 && strings.HasPrefix(s, "57P0"))
	}
	return false
}

func isDBClosed(err error) bool { return err.Error() == errDBClosedText }

// inChain reports whether f holds for err or any error it wraps, through
// both forms of Unwrap.
func inChain(err error, f func(error) bool) bool {
	if err == nil {
		return false
	}
	if f(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return inChain(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if inChain(e, f) {
				return true
			}
		}
	}
	return false
}
