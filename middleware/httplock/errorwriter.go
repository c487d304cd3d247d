package httplock

import (
	"net/http"
)

// fail hands err to the error handler, through a writer that keeps it
// from answering a failure with a success: a status below 400 is sent as
// 500 Internal Server Error, and so is a response the handler leaves
// unwritten, which net/http would otherwise send as 200 OK.
func (o *options) fail(w http.ResponseWriter, r *http.Request, err error) {
	ew := &errorWriter{ResponseWriter: w}
	o.onError(ew, r, err)
	if !ew.wrote {
		ew.WriteHeader(http.StatusInternalServerError)
	}
}

// errorWriter is the ResponseWriter the error handler gets.
// http.ResponseController reaches the features underneath through Unwrap.
type errorWriter struct {
	http.ResponseWriter
	wrote bool
}

var (
	_ http.Flusher = (*errorWriter)(nil)
	_ interface {
		http.ResponseWriter
		FlushError() error
		Unwrap() http.ResponseWriter
	} = (*errorWriter)(nil)
)

// WriteHeader sends code, or 500 for a final status below 400.
// Informational statuses other than 101 pass through.
func (ew *errorWriter) WriteHeader(code int) {
	if !ew.wrote && (code >= 200 || code == http.StatusSwitchingProtocols) {
		ew.wrote = true
		if code < 400 {
			code = http.StatusInternalServerError
		}
	}
	ew.ResponseWriter.WriteHeader(code)
}

// Write sends the status first, as 500, if none was sent.
func (ew *errorWriter) Write(b []byte) (int, error) {
	if !ew.wrote {
		ew.WriteHeader(http.StatusOK)
	}
	return ew.ResponseWriter.Write(b)
}

// FlushError sends the status first, as 500, if none was sent, then
// flushes. http.ResponseController.Flush calls it.
func (ew *errorWriter) FlushError() error {
	if !ew.wrote {
		ew.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(ew.ResponseWriter).Flush()
}

// Flush is FlushError for callers that use http.Flusher.
func (ew *errorWriter) Flush() { _ = ew.FlushError() }

// Unwrap returns the ResponseWriter underneath, for
// http.ResponseController.
func (ew *errorWriter) Unwrap() http.ResponseWriter { return ew.ResponseWriter }
