package advisory

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/hook"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// init sets the hooks of internal/hook, so that sqlxlock and mock can check
// options, report errors, run an owned session scope and read the
// statements a scope sends exactly as advisory does, without advisory
// exporting any of it.
func init() {
	hook.CheckOptions = func(v any) (*sql.TxOptions, error) {
		o, err := newOptions(v.([]Option))
		if err != nil {
			return nil, err
		}
		return o.txOpts, nil
	}
	hook.Fail = fail
	hook.OwnedSessionScope = func(ctx context.Context, conn *sql.Conn, k any, fn func(context.Context, *sql.Conn) error, v any) error {
		o, err := newOptions(v.([]Option))
		if err != nil {
			_ = conn.Close()
			return err
		}
		return withSessionLockConn(ctx, conn, k.(Key), fn, o, true)
	}
	hook.ScopeSQL = func(v any, xact bool, k any) (hook.Scope, error) {
		o, err := newOptions(v.([]Option))
		if err != nil {
			return hook.Scope{}, err
		}
		key := k.(Key)
		_, lock := o.lockStatement(xact, key)
		return hook.Scope{
			Lock:    lock,
			Unlock:  sqltext.Unlock(o.shared, key.sql()),
			Release: sqltext.Release(o.shared, key.sql()),
			Try:     o.try,
		}, nil
	}
}
