package idempotency_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/compilecheck"
)

// TestOptionsCompileOnlyWhereTheyApply builds each call with each option:
// Setup and Purge do not compile with an option of Run alone, and each
// call compiles with every option that applies to it.
func TestOptionsCompileOnlyWhereTheyApply(t *testing.T) {
	t.Parallel()
	compilecheck.Suite{
		Imports: []string{"context", "database/sql", "time", "github.com/pgadvisory/pgadvisory/advisory/idempotency"},
		Params:  "ctx context.Context, db *sql.DB, fn idempotency.Func",
		Misplaced: map[string]string{
			"NamespaceOnSetup":   `_ = idempotency.Setup(ctx, db, idempotency.Namespace(1))`,
			"WaitOnSetup":        `_ = idempotency.Setup(ctx, db, idempotency.Wait(time.Second))`,
			"TxOptionsOnSetup":   `_ = idempotency.Setup(ctx, db, idempotency.TxOptions(nil))`,
			"NoCreateOnSetup":    `_ = idempotency.Setup(ctx, db, idempotency.NoCreate())`,
			"NamespaceOnPurge":   `_, _ = idempotency.Purge(ctx, db, time.Hour, idempotency.Namespace(1))`,
			"WaitOnPurge":        `_, _ = idempotency.Purge(ctx, db, time.Hour, idempotency.Wait(time.Second))`,
			"TxOptionsOnPurge":   `_, _ = idempotency.Purge(ctx, db, time.Hour, idempotency.TxOptions(nil))`,
			"NoCreateOnPurge":    `_, _ = idempotency.Purge(ctx, db, time.Hour, idempotency.NoCreate())`,
			"RunOptionInOptions": `_ = []idempotency.Option{idempotency.Wait(time.Second)}`,
		},
		Placed: map[string]string{
			"Run": `_, _ = idempotency.Run(ctx, db, "k", fn, idempotency.Table("ops"), idempotency.Namespace(1),
	idempotency.Wait(time.Second), idempotency.TxOptions(nil), idempotency.NoCreate())`,
			"Setup":               `_ = idempotency.Setup(ctx, db, idempotency.Table("ops"))`,
			"Purge":               `_, _ = idempotency.Purge(ctx, db, time.Hour, idempotency.Table("ops"))`,
			"OptionsInRunOptions": `_ = []idempotency.RunOption{idempotency.Table("ops"), idempotency.Wait(time.Second)}`,
		},
	}.Run(t)
}
