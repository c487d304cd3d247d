package advisory_test

import (
	"errors"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// TestEngineReportsAdvisoryErrors checks that advisory's init gave the
// engine advisory's own sentinels, so that every error the engine builds
// matches them with errors.Is, while go doc shows them as errors.New.
func TestEngineReportsAdvisoryErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		front, engine error
	}{
		{"NotAcquired", advisory.ErrNotAcquired, scope.ErrNotAcquired},
		{"LockTimeout", advisory.ErrLockTimeout, scope.ErrLockTimeout},
		{"Deadlock", advisory.ErrDeadlock, scope.ErrDeadlock},
		{"NotHeld", advisory.ErrNotHeld, scope.ErrNotHeld},
		{"LockLost", advisory.ErrLockLost, scope.ErrLockLost},
		{"LockTableFull", advisory.ErrLockTableFull, scope.ErrLockTableFull},
		{"Standby", advisory.ErrStandby, scope.ErrStandby},
		{"SharedSession", advisory.ErrSharedSession, scope.ErrSharedSession},
		{"UnsupportedEngine", advisory.ErrUnsupportedEngine, scope.ErrUnsupportedEngine},
		{"LockerClosed", advisory.ErrLockerClosed, scope.ErrLockerClosed},
		{"BadOption", advisory.ErrBadOption, scope.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.front != tt.engine {
				t.Fatalf("the engine reports %p (%q), not advisory's %p", tt.engine, tt.engine, tt.front)
			}
			err := scope.FailKind("lock", "42", tt.engine, errors.New("driver"))
			if !errors.Is(err, tt.front) {
				t.Fatalf("%v does not match advisory's sentinel", err)
			}
		})
	}
}

// TestEngineErrorIsAdvisorys checks that the engine's refusal of an engine
// reaches callers as an *advisory.EngineError, worded as before.
func TestEngineErrorIsAdvisorys(t *testing.T) {
	t.Parallel()
	err := scope.FailKind("lock", "42", &scope.EngineError{Engine: scope.CockroachDB, Version: "24.1", Reason: "its locks lock nothing"}, nil)
	var ee *advisory.EngineError
	if !errors.As(err, &ee) {
		t.Fatalf("%v (%T): no *advisory.EngineError in it", err, errors.Unwrap(err))
	}
	if ee.Engine != "CockroachDB" || ee.Version != "24.1" || ee.Reason != "its locks lock nothing" {
		t.Errorf("EngineError = %+v", ee)
	}
	if !errors.Is(err, advisory.ErrUnsupportedEngine) {
		t.Errorf("%v does not match ErrUnsupportedEngine", err)
	}
	if got, want := err.Error(), "advisory: lock 42: CockroachDB 24.1: its locks lock nothing"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got, want := (&advisory.EngineError{Engine: "Citus", Reason: "r"}).Error(), "advisory: Citus: r"; got != want {
		t.Errorf("without a version: %q, want %q", got, want)
	}
}
