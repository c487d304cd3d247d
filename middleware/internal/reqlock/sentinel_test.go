package reqlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// TestSentinels checks that each transport's ErrNoLock and ErrBadKey name
// their own package and wrap the shared sentinel, which both transports
// test for, so that either package's value steers either transport.
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
}
