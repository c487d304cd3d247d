package httplock_test

import (
	"database/sql"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/middleware/httplock"
)

// TestBuildPanics checks that bad configuration panics when the middleware
// is built, naming the package.
func TestBuildPanics(t *testing.T) {
	t.Parallel()
	db := &sql.DB{}
	key := httplock.PathKey(1, "id")
	for name, build := range map[string]func(){
		"NilDB":              func() { httplock.XactLock(nil, key) },
		"NilKeyFunc":         func() { httplock.XactLock(db, nil) },
		"NilHandler":         func() { httplock.XactLock(db, key)(nil) },
		"NegativeWait":       func() { httplock.Wait(-time.Second) },
		"WaitTooLong":        func() { httplock.Wait((math.MaxInt32 + 1) * time.Millisecond) },
		"NegativeRetryAfter": func() { httplock.RetryAfter(-time.Second) },
		"NilCommitPolicy":    func() { httplock.CommitPolicy(nil) },
		"NilErrorHandler":    func() { httplock.ErrorHandler(nil) },
		"SuccessStatus":      func() { httplock.ErrorResponse(nil, http.StatusOK, "fine") },
		"StatusTooHigh":      func() { httplock.ErrorResponse(nil, 600, "odd") },
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
	httplock.XactLock(&sql.DB{}, httplock.PathKey(1, "id"),
		httplock.Wait(0), httplock.Wait(math.MaxInt32*time.Millisecond), httplock.RetryAfter(0),
		httplock.ErrorResponse(nil, 400, ""), httplock.ErrorResponse(nil, 599, ""), nil)
}
