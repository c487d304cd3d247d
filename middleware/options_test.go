package middleware_test

import (
	"database/sql"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/middleware"
)

// TestBuildPanics checks that bad configuration panics when the middleware
// is built, naming the package.
func TestBuildPanics(t *testing.T) {
	t.Parallel()
	db := &sql.DB{}
	key := middleware.PathKey(1, "id")
	for name, build := range map[string]func(){
		"NilDB":              func() { middleware.XactLock(nil, key) },
		"NilKeyFunc":         func() { middleware.XactLock(db, nil) },
		"NilHandler":         func() { middleware.XactLock(db, key)(nil) },
		"NegativeWait":       func() { middleware.Wait(-time.Second) },
		"WaitTooLong":        func() { middleware.Wait((math.MaxInt32 + 1) * time.Millisecond) },
		"NegativeRetryAfter": func() { middleware.RetryAfter(-time.Second) },
		"NilCommitPolicy":    func() { middleware.CommitPolicy(nil) },
		"NilErrorHandler":    func() { middleware.ErrorHandler(nil) },
		"SuccessStatus":      func() { middleware.ErrorResponse(nil, http.StatusOK, "fine") },
		"StatusTooHigh":      func() { middleware.ErrorResponse(nil, 600, "odd") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mustPanic(t, build)
		})
	}
}

// TestGoodOptionsDoNotPanic checks the edge values that are allowed.
func TestGoodOptionsDoNotPanic(t *testing.T) {
	t.Parallel()
	middleware.XactLock(&sql.DB{}, middleware.PathKey(1, "id"),
		middleware.Wait(0), middleware.Wait(math.MaxInt32*time.Millisecond), middleware.RetryAfter(0),
		middleware.ErrorResponse(nil, 400, ""), middleware.ErrorResponse(nil, 599, ""), nil)
}
