package httplock_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/compilecheck"
)

// TestOptionsCompileOnlyWhereTheyApply builds each middleware with each
// option: XactLock does not compile with an option of Idempotent alone,
// and each middleware compiles with every option that applies to it.
func TestOptionsCompileOnlyWhereTheyApply(t *testing.T) {
	t.Parallel()
	compilecheck.Suite{
		Imports: []string{"database/sql", "net/http", "time", "github.com/pgadvisory/pgadvisory/middleware/httplock"},
		Params:  "db *sql.DB, key httplock.KeyFunc, scope func(*http.Request) (string, error)",
		Misplaced: map[string]string{
			"IdempotencyTableOnXactLock":      `_ = httplock.XactLock(db, key, httplock.IdempotencyTable("ops"))`,
			"MaxResponseBytesOnXactLock":      `_ = httplock.XactLock(db, key, httplock.MaxResponseBytes(1024))`,
			"IdempotentMethodsOnXactLock":     `_ = httplock.XactLock(db, key, httplock.IdempotentMethods("POST"))`,
			"RequireIdempotencyKeyOnXactLock": `_ = httplock.XactLock(db, key, httplock.RequireIdempotencyKey())`,
			"IdempotencyScopeOnXactLock":      `_ = httplock.XactLock(db, key, httplock.IdempotencyScope(scope))`,
			"IdempotentOptionInOptions":       `_ = []httplock.Option{httplock.MaxResponseBytes(1024)}`,
		},
		Placed: map[string]string{
			"XactLock": `_ = httplock.XactLock(db, key, httplock.Wait(time.Second), httplock.RetryAfter(0), httplock.TxOptions(nil),
	httplock.CommitPolicy(func(int) bool { return true }), httplock.ErrorHandler(func(http.ResponseWriter, *http.Request, error) {}),
	httplock.ErrorResponse(nil, 500, ""))`,
			"Idempotent": `_ = httplock.Idempotent(db, httplock.Wait(time.Second), httplock.RetryAfter(0), httplock.TxOptions(nil),
	httplock.CommitPolicy(func(int) bool { return true }), httplock.ErrorHandler(func(http.ResponseWriter, *http.Request, error) {}),
	httplock.ErrorResponse(nil, 500, ""), httplock.IdempotencyTable("ops"), httplock.MaxResponseBytes(1024),
	httplock.IdempotentMethods("POST"), httplock.RequireIdempotencyKey(), httplock.IdempotencyScope(scope))`,
			"OptionsInIdempotentOptions": `_ = []httplock.IdempotentOption{httplock.Wait(time.Second), httplock.MaxResponseBytes(1024)}`,
		},
	}.Run(t)
}
