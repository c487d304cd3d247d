package scope

import (
	"errors"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// fakePGError is a server error of one SQLSTATE.
type fakePGError string

func (e fakePGError) Error() string    { return "server error " + string(e) }
func (e fakePGError) SQLState() string { return string(e) }

// TestSessionEndAnswer reads the answers of both statements that end a
// session scope: EndScope's without a heartbeat, LeaseEnd's with one.
func TestSessionEndAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		mark       int64
		n          int64
		err        error
		want       int64
		wantTxOpen bool
	}{
		{name: "ScopeReleased", n: 1, want: 1},
		{name: "ScopeNotHeld", n: 0, want: 0},
		{name: "ScopeReleasedTxOpen", n: 3, want: 1, wantTxOpen: true},
		{name: "ScopeNotHeldTxOpen", n: 2, want: 0, wantTxOpen: true},
		{name: "ScopeFailedTx", err: fakePGError("25P02"), want: 0, wantTxOpen: true},
		{name: "ScopeError", err: errors.New("broken"), want: 0},
		{name: "LeaseReleased", mark: 7, n: sqltext.EndReleased, want: 1},
		{name: "LeaseReleasedTxOpen", mark: 7, n: sqltext.EndReleased | sqltext.EndTxOpen, want: 1, wantTxOpen: true},
		{name: "LeaseEndedElsewhere", mark: 7, n: sqltext.EndEnded, want: endedElsewhere},
		{name: "LeaseNotHeld", mark: 7, n: sqltext.EndNotHeld, want: 0},
		{name: "LeaseNotHeldTxOpen", mark: 7, n: sqltext.EndTxOpen, want: 0, wantTxOpen: true},
		{name: "LeaseFailedTx", mark: 7, err: fakePGError("25P02"), want: 0, wantTxOpen: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &sessionEnd{pid: 42, mark: tt.mark}
			got, txOpen := e.answer(tt.n, tt.err)
			if got != tt.want || txOpen != tt.wantTxOpen {
				t.Errorf("answer(%d, %v) = %d, %v; want %d, %v", tt.n, tt.err, got, txOpen, tt.want, tt.wantTxOpen)
			}
		})
	}
}

// TestSessionEndElsewhere checks that a scope with a heartbeat whose end
// ended its backend from another one, as behind a transaction pooler,
// reports the lock lost and discards the session it ran on: whether the
// lock was held to the end is not known.
func TestSessionEndElsewhere(t *testing.T) {
	t.Parallel()
	s := &fakeSession{}
	e := &sessionEnd{s: s, key: sqltext.Key{Bigint: 42}, o: &Options{}, pid: 42, mark: 7}
	err := e.end(endedElsewhere, nil, false, "unlock", "42", false)
	if !errors.Is(err, ErrLockLost) {
		t.Errorf("end = %v; want ErrLockLost", err)
	}
	if !s.discarded {
		t.Error("the session the statement ran on was not discarded")
	}
}

// TestEndStatement checks that a scope with a heartbeat ends as a lease,
// on its own backend alone, and one without as a plain scope.
func TestEndStatement(t *testing.T) {
	t.Parallel()
	o := &Options{}
	key := sqltext.Key{Bigint: 42}
	if got, want := o.EndStatement(key, true, 1234, 7), sqltext.LeaseEnd(1234, 7, false, true, key); got != want {
		t.Errorf("EndStatement with a mark = %q; want LeaseEnd's %q", got, want)
	}
	if got, want := o.EndStatement(key, false, 0, 0), sqltext.EndScope(false, false, key); got != want {
		t.Errorf("EndStatement without a mark = %q; want EndScope's %q", got, want)
	}
}
