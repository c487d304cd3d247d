package httplock

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
)

// record is a response that Idempotent stores, as JSON, with the request
// it answered.
type record struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

func (rec *record) encode() ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("httplock: encode response record: %w", err)
	}
	return b, nil
}

func decodeRecord(b []byte) (*record, error) {
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Status < 100 || rec.Status > 999 {
		return nil, fmt.Errorf("httplock: unreadable response record (%d bytes): %v", len(b), err)
	}
	return &rec, nil
}

// write sends rec on w, marked as replayed when replayed is true.
func (rec *record) write(w http.ResponseWriter, replayed bool) {
	h := w.Header()
	for k, v := range rec.Header {
		h[k] = v
	}
	if replayed {
		h.Set(ReplayedHeader, "true")
	}
	h.Set("Content-Length", strconv.Itoa(len(rec.Body)))
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body)
}

// bufferWriter is the ResponseWriter the handler of Idempotent gets. It
// keeps the whole response, up to max bytes of body, for Idempotent to
// record and send after the commit. http.ResponseController reaches the
// features underneath (deadlines) through Unwrap; Flush does nothing and
// Hijack is refused.
type bufferWriter struct {
	w        http.ResponseWriter
	before   http.Header // the response headers before the handler ran
	header   http.Header
	status   int
	body     []byte
	max      int
	overflow bool
}

var (
	_ http.ResponseWriter = (*bufferWriter)(nil)
	_ http.Flusher        = (*bufferWriter)(nil)
	_ http.Hijacker       = (*bufferWriter)(nil)
	_ interface {
		FlushError() error
		Unwrap() http.ResponseWriter
	} = (*bufferWriter)(nil)
)

func newBufferWriter(h http.Header, max int, w http.ResponseWriter) *bufferWriter {
	return &bufferWriter{w: w, before: h.Clone(), header: h.Clone(), max: max}
}

func (bw *bufferWriter) Header() http.Header { return bw.header }

// WriteHeader keeps the first final status.
func (bw *bufferWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if bw.status == 0 && code >= 200 {
		bw.status = code
	}
}

// Write keeps b, up to the limit; past it, it keeps nothing more and
// reports ErrResponseTooLarge.
func (bw *bufferWriter) Write(b []byte) (int, error) {
	if bw.status == 0 {
		bw.status = http.StatusOK
	}
	if bw.overflow || len(bw.body)+len(b) > bw.max {
		bw.overflow = true
		return 0, ErrResponseTooLarge
	}
	bw.body = append(bw.body, b...)
	return len(b), nil
}

// FlushError does nothing: the response leaves after the commit.
func (bw *bufferWriter) FlushError() error { return nil }

// Flush does nothing.
func (bw *bufferWriter) Flush() {}

// Hijack is not supported: a hijacked connection cannot be replayed.
func (bw *bufferWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, fmt.Errorf("httplock: hijack under Idempotent: %w", http.ErrNotSupported)
}

// Unwrap returns the ResponseWriter underneath, for
// http.ResponseController's deadlines.
func (bw *bufferWriter) Unwrap() http.ResponseWriter { return bw.w }

// record returns the response as Idempotent records it for r: the
// headers the handler set or changed, less Set-Cookie, and the body.
func (bw *bufferWriter) record(r *http.Request) *record {
	status := bw.status
	if status == 0 {
		status = http.StatusOK
	}
	rec := &record{Method: r.Method, Path: r.URL.Path, Status: status, Body: bw.body}
	for k, v := range bw.header {
		if k == "Set-Cookie" || k == "Content-Length" || slices.Equal(bw.before[k], v) {
			continue
		}
		if rec.Header == nil {
			rec.Header = make(http.Header)
		}
		rec.Header[k] = v
	}
	return rec
}
