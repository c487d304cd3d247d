package middleware

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// The classes of failure that [XactLock] hands its error handler, besides
// advisory.ErrNotAcquired and advisory.ErrLockTimeout. Match them with
// [errors.Is]; the cause stays reachable with [errors.As].
var (
	// ErrBadKey means the KeyFunc found no key in the request, as for a
	// missing or malformed path parameter. Every KeyFunc error matches
	// it. No transaction was begun.
	ErrBadKey = errors.New("middleware: bad lock key")

	// ErrUnavailable means the database could not be reached, or dropped
	// the connection; see [IsUnavailable]. The handler was not called.
	ErrUnavailable = errors.New("middleware: database unavailable")

	// ErrCommit means the commit before the response failed, so the
	// handler's work was rolled back and its response was replaced.
	ErrCommit = errors.New("middleware: commit failed")
)

// IsUnavailable reports whether err says that the database cannot be used
// at the moment, rather than that a statement failed: a broken or closed
// connection (driver.ErrBadConn, sql.ErrConnDone), a network error, or a
// server error of SQLSTATE class 08 (connection exception) or 57P01 to
// 57P05 (shutdown, crash recovery, startup, dropped database, idle session
// timeout). A cancelled or expired context is not unavailability.
func IsUnavailable(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded): // which is a net.Error
		return false
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		s := se.SQLState()
		return strings.HasPrefix(s, "08") || (len(s) == 5 && strings.HasPrefix(s, "57P0"))
	}
	return false
}

// classify gives err, from taking the lock, the class the error handler
// sees.
func classify(err error) error {
	switch {
	case errors.Is(err, advisory.ErrNotAcquired), errors.Is(err, advisory.ErrLockTimeout):
		return err
	case IsUnavailable(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// keyError makes every KeyFunc error match ErrBadKey.
func keyError(err error) error {
	if errors.Is(err, ErrBadKey) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBadKey, err)
}

// A response is the status and body that the default error handler sends
// for errors matching target; a nil target matches every error.
type response struct {
	target error
	status int
	body   string
}

// The default responses. Bodies are short plain text that name no SQL and
// no driver message.
var defaultResponses = []response{
	{ErrBadKey, http.StatusBadRequest, "bad request: invalid resource key"},
	{advisory.ErrNotAcquired, http.StatusConflict, "conflict: resource busy, retry later"},
	{advisory.ErrLockTimeout, http.StatusConflict, "conflict: resource busy, retry later"},
	{ErrUnavailable, http.StatusServiceUnavailable, "service unavailable"},
	{ErrCommit, http.StatusInternalServerError, "internal server error"},
	{nil, http.StatusInternalServerError, "internal server error"},
}

// respond is the default error handler: it finds err's response among the
// options' and the defaults and sends it as plain text, with Retry-After
// when the lock was busy.
func (o *options) respond(w http.ResponseWriter, r *http.Request, err error) {
	resp := o.lookup(err)
	if o.retryAfter > 0 && (errors.Is(err, advisory.ErrNotAcquired) || errors.Is(err, advisory.ErrLockTimeout)) {
		w.Header().Set("Retry-After", strconv.FormatInt(o.retryAfterSeconds(), 10))
	}
	http.Error(w, resp.body, resp.status)
}

// lookup returns the response for err: the latest given with
// [ErrorResponse] for a target that err matches, else the default for such
// a target, else the latest catch-all given with ErrorResponse, else the
// default catch-all.
func (o *options) lookup(err error) response {
	var fallback *response
	for i := len(o.responses) - 1; i >= 0; i-- {
		resp := o.responses[i]
		switch {
		case resp.target == nil:
			if fallback == nil {
				fallback = &o.responses[i]
			}
		case errors.Is(err, resp.target):
			return resp
		}
	}
	for _, resp := range defaultResponses {
		if resp.target == nil {
			break
		}
		if errors.Is(err, resp.target) {
			return resp
		}
	}
	if fallback != nil {
		return *fallback
	}
	return defaultResponses[len(defaultResponses)-1]
}
