package scope

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Xact runs a transaction scope on tx, which it takes over: it takes key
// as o says, in form f, waiting as [XactTake] says (owned: the scope
// began tx, with o.TxOpts, and nothing has run in it), runs fn with a
// context that carries the scope (for [TxFromContext], [CommitEarly], and
// [TxForm], which gives the lock calls fn makes on tx form f too), and
// commits if fn returns nil, or rolls back otherwise. Nothing is committed
// once ctx has ended. A panic in fn rolls back before it goes on.
//
// A scope that began tx on a *sql.DB passes that *sql.DB's form
// ([DBForm]); one that took over a transaction the caller began passes
// [TxForm]'s: an outer scope's form, or that of the driver under tx.
func Xact(ctx context.Context, tx *sql.Tx, owned bool, key sqltext.Key, fn func(context.Context, *sql.Tx) error, o *Options, f sqltext.Form) error {
	return XactScope(ctx, SQLTx(tx), owned, key, func(ctx context.Context) error { return fn(ctx, tx) }, o, f)
}

// XactScope is [Xact] on t, a transaction of any front end: run calls the
// caller's fn with the scope's context, on the front end's own
// transaction. [ScopeTx] finds t again in that context.
func XactScope(ctx context.Context, t Tx, owned bool, key sqltext.Key, run func(context.Context) error, o *Options, f sqltext.Form) error {
	finished := false
	defer func() {
		// fn panicked or called runtime.Goexit: the panic goes on, with
		// its own stack, after the rollback.
		if !finished {
			_ = rollback(ctx, t)
		}
	}()

	op := o.LockOp(true)
	acquired, err := XactTake(ctx, o.Observed(), t, owned, op, []sqltext.Key{key}, o, f)
	if err == nil && o.Try && !acquired {
		err = FailKind(op, key.String(), ErrNotAcquired, nil)
	}
	if err != nil {
		finished = true
		return Join(err, rollback(ctx, t))
	}

	s := &xactScope{tx: t, owned: true, form: f}
	err = run(context.WithValue(ctx, xactScopeKey{}, s))
	finished = true
	err = end(ctx, t, s, err)
	if h := o.Observed(); h != nil {
		h.Released(ctx, "xact end", []sqltext.Key{key}, err)
	}
	return err
}

// ScopeTx returns the transaction of the transaction scope whose fn
// received ctx, and the form of its lock calls, if ctx is such a context:
// a front end's own [Tx], which it converts back to its driver's type.
func ScopeTx(ctx context.Context) (Tx, sqltext.Form, bool) {
	s, ok := ctx.Value(xactScopeKey{}).(*xactScope)
	if !ok {
		return nil, 0, false
	}
	return s.tx, s.form, true
}

// end ends a transaction scope whose fn returned err: the transaction
// commits if fn committed it early or returned nil, and rolls back
// otherwise. The lock ends with it.
func end(ctx context.Context, tx Tx, s *xactScope, err error) error {
	if early, commitErr := s.outcome(); early {
		return Join(err, commitErr)
	}
	if err != nil {
		return Join(err, rollback(ctx, tx))
	}
	return commit(ctx, tx)
}

// commit commits tx unless ctx has ended. database/sql rolls back a
// transaction whose context ended, but from a goroutine of its own, so a
// commit could still win that race; here the rollback wins every time.
func commit(ctx context.Context, tx Tx) error {
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback(ctx)
		return Fail(ctx, "commit", "", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Fail(ctx, "commit", "", err)
	}
	return nil
}

// Rollback ends tx, reporting only a failure that says something: a
// transaction that ctx or fn already ended is not one.
func Rollback(tx *sql.Tx) error {
	return rollback(context.Background(), SQLTx(tx))
}

// rollback is [Rollback] on tx, a transaction of any front end, bounded
// by ctx as [Tx.Rollback] says.
func rollback(ctx context.Context, tx Tx) error {
	if tx == nil {
		return nil
	}
	if err := tx.Rollback(ctx); err != nil {
		return fmt.Errorf("advisory: rollback: %w", err)
	}
	return nil
}

// xactScope is what a transaction scope keeps in its fn's context: the
// transaction, its form, and whether fn committed it early.
type xactScope struct {
	tx    Tx           // [SQLTx] of the scope's *sql.Tx
	owned bool         // made by a scope, which reads the outcome
	form  sqltext.Form // the form of the lock calls on tx ([TxForm])

	mu        sync.Mutex
	committed bool  // CommitEarly ran
	err       error // and returned this
}

type xactScopeKey struct{}

// outcome reports whether CommitEarly ran, and what it returned.
func (s *xactScope) outcome() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed, s.err
}

// ErrNoScope is returned by CommitEarly outside a transaction scope's fn.
var ErrNoScope = errors.New("advisory: CommitEarly called outside the fn of WithXactLock")

// NewTxContext returns a copy of ctx that carries tx for [TxFromContext],
// in a scope that [CommitEarly] refuses.
func NewTxContext(ctx context.Context, tx *sql.Tx) context.Context {
	return context.WithValue(ctx, xactScopeKey{}, &xactScope{tx: SQLTx(tx)})
}

// TxFromContext returns the transaction of the scope in ctx, if any.
func TxFromContext(ctx context.Context) (*sql.Tx, bool) {
	s, ok := ctx.Value(xactScopeKey{}).(*xactScope)
	if !ok {
		return nil, false
	}
	t, ok := s.tx.(*sqlTx)
	return (*sql.Tx)(t), ok
}

// CommitEarly commits the transaction of the scope whose fn received ctx,
// once; later calls return the first result.
func CommitEarly(ctx context.Context) error {
	s, ok := ctx.Value(xactScopeKey{}).(*xactScope)
	if !ok || !s.owned {
		return ErrNoScope
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.committed {
		s.committed = true
		s.err = commit(ctx, s.tx)
	}
	return s.err
}
