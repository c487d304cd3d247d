package httplock

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net"
	"net/http"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// The states of a responseWriter's transaction.
const (
	pending   = iota // nothing written yet; the transaction is open
	decided          // committed or rolled back; writes go through
	abandoned        // the commit failed; an error was sent, writes are dropped
)

// responseWriter ends the request's transaction before the first byte of
// the response leaves: on the handler's first WriteHeader, Write, Flush or
// Hijack it commits or rolls back, as the commit policy says for the
// status. If the commit fails, or the request's context has ended so that
// it is not tried, it rolls back, sends the error response instead and
// drops whatever the handler writes afterwards, so that the client never
// sees a success for work that was rolled back.
//
// Other optional features (deadlines, full duplex) are reached through
// Unwrap by http.ResponseController.
type responseWriter struct {
	w      http.ResponseWriter
	r      *http.Request   // the request without the transaction, for onError
	scope  context.Context // the context WithXactLock gave fn, to commit early through
	tx     *sql.Tx
	o      *options
	before http.Header // the headers as they were before the handler ran
	state  int
	err    error       // why the response was abandoned
	header http.Header // handed to the handler once the response is abandoned
}

func newResponseWriter(scope context.Context, w http.ResponseWriter, r *http.Request, tx *sql.Tx, o *options) *responseWriter {
	return &responseWriter{scope: scope, w: w, r: r, tx: tx, o: o, before: w.Header().Clone()}
}

// Compile-time checks of the interfaces the wrapper must keep.
var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
	_ http.Hijacker       = (*responseWriter)(nil)
	_ interface {
		FlushError() error
		Unwrap() http.ResponseWriter
	} = (*responseWriter)(nil)
)

// Header returns the response headers. Once the response has been
// abandoned it returns a detached map, so that the handler cannot touch the
// error response.
func (rw *responseWriter) Header() http.Header {
	if rw.state == abandoned {
		if rw.header == nil {
			rw.header = make(http.Header)
		}
		return rw.header
	}
	return rw.w.Header()
}

// WriteHeader ends the transaction as the commit policy says for code, then
// sends code. Informational codes other than 101 pass through and decide
// nothing, as they do in net/http.
func (rw *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		// As net/http does, before the transaction is touched.
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if rw.state == pending && (code >= 200 || code == http.StatusSwitchingProtocols) {
		rw.end(code)
	}
	if rw.state != abandoned {
		rw.w.WriteHeader(code)
	}
}

// Write ends the transaction as for status 200 if nothing was written
// before, then writes b. After a failed commit it writes nothing and
// returns the commit's error.
func (rw *responseWriter) Write(b []byte) (int, error) {
	if rw.state == pending {
		rw.end(http.StatusOK)
	}
	if rw.state == abandoned {
		return 0, rw.err
	}
	return rw.w.Write(b)
}

// FlushError ends the transaction as for status 200 if nothing was written
// before, then flushes. http.ResponseController.Flush calls it.
func (rw *responseWriter) FlushError() error {
	if rw.state == pending {
		rw.end(http.StatusOK)
	}
	if rw.state == abandoned {
		return rw.err
	}
	return http.NewResponseController(rw.w).Flush()
}

// Flush is FlushError for callers that use http.Flusher.
func (rw *responseWriter) Flush() { _ = rw.FlushError() }

// Hijack hands over the connection, if the ResponseWriter underneath can
// hijack it. If none down the Unwrap chain can, as under HTTP/2, it
// returns an error matching http.ErrNotSupported and leaves the
// transaction open. Otherwise it first ends the transaction as for status
// 101; if that commit fails, the error response has been sent, nothing is
// hijacked, and Hijack returns an error matching [ErrCommit].
func (rw *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h := hijacker(rw.w)
	if h == nil {
		return nil, nil, fmt.Errorf("httplock: hijack: %w", http.ErrNotSupported)
	}
	if rw.state == pending {
		rw.end(http.StatusSwitchingProtocols)
	}
	if rw.state == abandoned {
		return nil, nil, rw.err
	}
	return h.Hijack()
}

// hijacker returns the first http.Hijacker down w's Unwrap chain, or nil.
func hijacker(w http.ResponseWriter) http.Hijacker {
	for {
		switch t := w.(type) {
		case http.Hijacker:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

// Unwrap returns the ResponseWriter underneath, for
// http.ResponseController.
func (rw *responseWriter) Unwrap() http.ResponseWriter { return rw.w }

// end commits or rolls back the transaction for a response with status
// code. A failed commit, or one refused because the request's context has
// ended, abandons the response: the headers go back to what they were
// before the handler ran, and the error response is sent.
func (rw *responseWriter) end(code int) {
	rw.state = decided
	if !rw.o.commit(code) {
		// The rollback's error changes nothing: a transaction whose
		// rollback fails is over, and its work is lost either way.
		_ = rw.tx.Rollback()
		return
	}
	if err := advisory.CommitEarly(rw.scope); err != nil {
		rw.state = abandoned
		rw.err = fmt.Errorf("%w: %w", ErrCommit, reqlock.WithContext(rw.r.Context(), err))
		h := rw.w.Header()
		clear(h)
		maps.Copy(h, rw.before)
		rw.o.fail(rw.w, rw.r, rw.err)
	}
}
