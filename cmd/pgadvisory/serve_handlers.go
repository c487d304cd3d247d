package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// This file holds pgadvisory serve's HTTP handlers: / is the page, and
// /metrics the collector's metrics.

// readStateFunc reads the lock state for one view of the page.
type readStateFunc func(ctx context.Context) (lockState, error)

// maxRefresh bounds ?refresh=.
const maxRefresh = 3600

// pageTimeout bounds the queries of one view of the page.
const pageTimeout = 10 * time.Second

// newServeHandler returns the handler of pgadvisory serve: the page at /,
// read with read and reloading every refresh seconds unless ?refresh=
// says otherwise, and metrics at /metrics. Any other path is not found,
// and any method but GET and HEAD is not allowed.
func newServeHandler(read readStateFunc, metrics http.Handler, refresh int) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		servePageHandler(w, r, read, refresh)
	})
	return mux
}

// servePageHandler renders the page.
func servePageHandler(w http.ResponseWriter, r *http.Request, read readStateFunc, refresh int) {
	if v := r.URL.Query().Get("refresh"); v != "" {
		n, err := parseRefresh(v)
		if err != nil {
			http.Error(w, "pgadvisory serve: ?refresh="+v+": "+err.Error(), http.StatusBadRequest)
			return
		}
		refresh = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	s, err := read(ctx)
	status := http.StatusOK
	p := newPageData(s, refresh)
	if err != nil {
		status = http.StatusServiceUnavailable
		p.Error = "Cannot read the lock state: " + err.Error()
	}
	var buf bytes.Buffer
	if err := servePage.Execute(&buf, p); err != nil {
		http.Error(w, "pgadvisory serve: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// The page has no script and loads nothing from elsewhere.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// parseRefresh reads ?refresh=: a number of seconds (0 for none) or a
// duration such as 30s, from 1s to an hour.
func parseRefresh(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		d, derr := time.ParseDuration(v)
		if derr != nil || d%time.Second != 0 {
			return 0, fmt.Errorf("want a number of seconds, or a duration of whole seconds such as 30s")
		}
		n = int(d / time.Second)
	}
	if n < 0 || n > maxRefresh {
		return 0, fmt.Errorf("want 0 (no reload) to %d seconds", maxRefresh)
	}
	return n, nil
}

// refreshSeconds turns the --refresh flag into whole seconds, at least 1
// unless it is 0.
func refreshSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(1, int((d+time.Second/2)/time.Second))
}
