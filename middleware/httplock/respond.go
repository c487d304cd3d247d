package httplock

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// StatusClientClosedRequest is the status the default error handler
// sends when the request's context was cancelled, which for a server
// request means that the client went away: the non-standard 499 that
// nginx logs as "client closed request". No client normally sees it. It
// is written, with no body, so that net/http does not send its implicit
// 200 OK should the client still be there, for example when a
// middleware further out cancelled the context.
const StatusClientClosedRequest = 499

// A response is the status and body that the default error handler sends
// for errors matching target; a nil target matches every error.
type response struct {
	target error
	status int
	body   string
}

// The default responses, in the order they are tried. Bodies are short
// plain text that name no SQL and no driver message. The end of the
// request's context comes first: a commit that failed because the client
// went away is answered as the client going away.
var defaultResponses = []response{
	{context.Canceled, StatusClientClosedRequest, ""},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "service unavailable"},
	{ErrBadKey, http.StatusBadRequest, "bad request: invalid resource key"},
	{ErrMismatch, http.StatusUnprocessableEntity, "unprocessable entity: Idempotency-Key reused for another request"},
	{advisory.ErrNotAcquired, http.StatusConflict, "conflict: resource busy, retry later"},
	{advisory.ErrLockTimeout, http.StatusConflict, "conflict: resource busy, retry later"},
	{ErrUnavailable, http.StatusServiceUnavailable, "service unavailable"},
	{ErrCommit, http.StatusInternalServerError, "internal server error"},
	{nil, http.StatusInternalServerError, "internal server error"},
}

// respond is the default error handler: it finds err's response among the
// options' and the defaults and sends it as plain text, or with no body
// when the body is empty, with Retry-After when the lock was busy.
func (o *options) respond(w http.ResponseWriter, r *http.Request, err error) {
	resp := o.lookup(err)
	if o.RetryAfter > 0 && reqlock.Busy(err) {
		w.Header().Set("Retry-After", strconv.FormatInt(o.RetryAfterSeconds(), 10))
	}
	if resp.body == "" {
		w.WriteHeader(resp.status)
		return
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
