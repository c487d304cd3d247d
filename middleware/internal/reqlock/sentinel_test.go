package reqlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// TestSentinels checks that each transport's ErrNoLock and ErrBadKey name
// their own package and match the shared class, which both transports
// test for, so that either package's value steers either transport; that
// an error wrapping one matches it; and that go doc shows no internal
// name for them (they are not built from reqlock's values).
func TestSentinels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		prefix string
		shared error
	}{
		{"HTTPNoLock", httplock.ErrNoLock, "httplock: ", reqlock.ErrNoLock},
		{"HTTPBadKey", httplock.ErrBadKey, "httplock: ", reqlock.ErrBadKey},
		{"GRPCNoLock", grpclock.ErrNoLock, "grpclock: ", reqlock.ErrNoLock},
		{"GRPCBadKey", grpclock.ErrBadKey, "grpclock: ", reqlock.ErrBadKey},
	}
	for _, tt := range tests {
		if !strings.HasPrefix(tt.err.Error(), tt.prefix) || !errors.Is(tt.err, tt.shared) {
			t.Errorf("%s: %q, want a message starting with %q that matches %v", tt.name, tt.err, tt.prefix, tt.shared)
		}
	}
	if errors.Is(httplock.ErrNoLock, reqlock.ErrBadKey) || errors.Is(grpclock.ErrBadKey, reqlock.ErrNoLock) {
		t.Error("ErrNoLock and ErrBadKey match each other")
	}
	for _, tt := range tests {
		wrapped := fmt.Errorf("key func: %w", tt.err)
		if !errors.Is(wrapped, tt.err) || !errors.Is(wrapped, tt.shared) {
			t.Errorf("%s: %v, wrapped, matches neither it nor its class", tt.name, tt.err)
		}
		if errors.Unwrap(tt.err) != nil {
			t.Errorf("%s: unwraps to %v; want a value of the transport's own", tt.name, errors.Unwrap(tt.err))
		}
	}
	if errors.Is(httplock.ErrNoLock, grpclock.ErrNoLock) || errors.Is(httplock.ErrBadKey, grpclock.ErrBadKey) {
		t.Error("one transport's sentinel matches the other's; want each to match its class only")
	}
}
