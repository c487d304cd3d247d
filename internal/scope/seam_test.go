package scope

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// fakeSession is a front end of no driver: it answers each statement with
// rows or err, and records what the engine asked of it. It proves that the
// engine's lock calls need nothing of database/sql.
type fakeSession struct {
	rows      int64
	err       error
	engine    *Engine
	sent      []string
	discarded bool
	committed bool
	rolled    bool
	closed    bool
	underTx   bool
}

var (
	_ ScopeSession = (*fakeSession)(nil)
	_ Tx           = (*fakeSession)(nil)
)

func (f *fakeSession) Exec(_ context.Context, query string, _ ...any) (int64, error) {
	f.sent = append(f.sent, query)
	return f.rows, f.err
}

func (f *fakeSession) QueryRow(_ context.Context, query string, _ ...any) Row {
	f.sent = append(f.sent, query)
	return fakeRow{f.err}
}

func (f *fakeSession) Query(_ context.Context, query string, _ ...any) (Rows, error) {
	f.sent = append(f.sent, query)
	return nil, f.err
}

func (f *fakeSession) Engine(context.Context) (*Engine, error) { return f.engine, nil }
func (f *fakeSession) Discard()                                { f.discarded = true }
func (f *fakeSession) Close()                                  { f.closed = true }
func (f *fakeSession) CloseUnderTx(bool)                       { f.underTx = true }
func (f *fakeSession) Commit(context.Context) error            { f.committed = true; return nil }
func (f *fakeSession) Rollback(context.Context) error          { f.rolled = true; return nil }

type fakeRow struct{ err error }

func (r fakeRow) Scan(...any) error { return r.err }

// fakeSQLState is a server error as a driver reports one.
type fakeSQLState string

func (e fakeSQLState) Error() string    { return "server error " + string(e) }
func (e fakeSQLState) SQLState() string { return string(e) }

func TestSeamSessionLockCalls(t *testing.T) {
	t.Parallel()
	key := sqltext.Key{Bigint: 42}
	crdb := &Engine{Name: CockroachDB, Session: crdbSession, Xact: crdbXact}
	tests := []struct {
		name        string
		fake        fakeSession
		release     bool
		want        bool
		wantErr     error
		wantDiscard bool
	}{
		{name: "TryTakes", fake: fakeSession{rows: 1}, want: true},
		{name: "TryFindsBusy", fake: fakeSession{rows: 0}},
		{name: "FailureDiscards", fake: fakeSession{err: fakeSQLState("40P01")}, wantErr: ErrDeadlock, wantDiscard: true},
		{name: "RefusalKeeps", fake: fakeSession{err: fakeSQLState(sqltext.StandbyState)}, wantErr: ErrStandby},
		{name: "EngineRefuses", fake: fakeSession{engine: crdb}, wantErr: ErrUnsupportedEngine},
		{name: "ReleaseHeld", fake: fakeSession{rows: 1}, release: true},
		{name: "ReleaseNotHeldDiscards", fake: fakeSession{rows: 0}, release: true, wantErr: ErrNotHeld, wantDiscard: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := tt.fake
			ctx := context.Background()
			var got bool
			var err error
			if tt.release {
				err = Release(ctx, &f, "unlock", []sqltext.Key{key}, sqltext.UnlockStmt(sqltext.Inline, false, key))
			} else {
				got, err = AcquireWith(ctx, nil, &f, "try lock", []sqltext.Key{key},
					sqltext.TryLockStmt(sqltext.Inline, SessionGuard(ctx, &f), false, false, key))
			}
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("got %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
			if f.discarded != tt.wantDiscard {
				t.Errorf("discarded = %v; want %v", f.discarded, tt.wantDiscard)
			}
		})
	}
}

func TestSeamXactTakeTries(t *testing.T) {
	t.Parallel()
	key := sqltext.Key{Pair: true, A: 1, B: 2}
	tests := []struct {
		name string
		rows int64
		want bool
	}{
		{"Takes", 1, true},
		{"FindsBusy", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeSession{rows: tt.rows}
			got, err := XactTake(context.Background(), nil, f, false, "try xact lock", []sqltext.Key{key}, &Options{Try: true}, sqltext.Inline)
			if err != nil || got != tt.want {
				t.Fatalf("XactTake = %v, %v; want %v, nil", got, err, tt.want)
			}
			if len(f.sent) != 1 {
				t.Errorf("sent %d statements (%q); want the try alone", len(f.sent), f.sent)
			}
		})
	}
}

func TestSQLConnOfNil(t *testing.T) {
	t.Parallel()
	if SQLConn(nil) != nil || SQLTx(nil) != nil {
		t.Fatal("the seam of a nil *sql.Conn or *sql.Tx is not nil")
	}
	if _, err := Take(context.Background(), nil, SQLConn(nil), "lock", nil, &Options{}, sqltext.Inline); !errors.Is(err, ErrNilConn) {
		t.Errorf("Take on a nil conn = %v; want ErrNilConn", err)
	}
}

// TestSeamSessionScope checks a session scope on the seam: fn runs only
// under the lock, the scope ends with one statement, and a session the
// scope took is given back, discarded only when in doubt.
func TestSeamSessionScope(t *testing.T) {
	t.Parallel()
	errFn := errors.New("fn failed")
	tests := []struct {
		name        string
		rows        int64
		try         bool
		fnErr       error
		wantErr     error
		wantRan     bool
		wantDiscard bool
	}{
		{name: "Runs", rows: 1, wantRan: true},
		{name: "FnFails", rows: 1, fnErr: errFn, wantErr: errFn, wantRan: true},
		{name: "TryFindsBusy", rows: 0, try: true, wantErr: ErrNotAcquired},
	}
	for _, tt := range tests {
		for _, owned := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/owned=%v", tt.name, owned), func(t *testing.T) {
				t.Parallel()
				f := &fakeSession{rows: tt.rows}
				ran := false
				err := SessionScopeOn(context.Background(), f, sqltext.Key{Bigint: 42}, func(context.Context) error {
					ran = true
					return tt.fnErr
				}, &Options{Try: tt.try}, owned, sqltext.Params, nil)
				switch {
				case tt.wantErr == nil && err != nil, tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Errorf("SessionScopeOn = %v; want %v", err, tt.wantErr)
				case ran != tt.wantRan:
					t.Errorf("fn ran: %v; want %v", ran, tt.wantRan)
				case f.closed != owned:
					t.Errorf("closed: %v; want %v (owned)", f.closed, owned)
				case f.discarded != tt.wantDiscard:
					t.Errorf("discarded: %v; want %v", f.discarded, tt.wantDiscard)
				case f.underTx:
					t.Error("closed under a transaction that fn did not leave open")
				}
				if tt.wantRan && len(f.sent) != 2 {
					t.Errorf("sent %d statements (%q); want the lock and the end", len(f.sent), f.sent)
				}
			})
		}
	}
}
