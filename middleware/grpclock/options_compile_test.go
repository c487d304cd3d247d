package grpclock_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/compilecheck"
)

// TestOptionsCompileOnlyWhereTheyApply builds each interceptor with every
// option, which both take, and checks that no other package's options
// take their place.
func TestOptionsCompileOnlyWhereTheyApply(t *testing.T) {
	t.Parallel()
	compilecheck.Suite{
		Imports: []string{"database/sql", "time", "github.com/pgadvisory/pgadvisory/advisory", "github.com/pgadvisory/pgadvisory/middleware/grpclock"},
		Params:  "db *sql.DB, key grpclock.KeyFunc, skey grpclock.StreamKeyFunc",
		Misplaced: map[string]string{
			"AdvisoryWaitOnUnary": `_ = grpclock.UnaryServerInterceptor(db, key, advisory.Wait(time.Second))`,
		},
		Placed: map[string]string{
			"Unary":  `_ = grpclock.UnaryServerInterceptor(db, key, grpclock.Wait(time.Second), grpclock.RetryAfter(0), grpclock.TxOptions(nil))`,
			"Stream": `_ = grpclock.StreamServerInterceptor(db, skey, grpclock.Wait(time.Second), grpclock.RetryAfter(0), grpclock.TxOptions(nil))`,
		},
	}.Run(t)
}
