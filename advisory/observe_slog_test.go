package advisory_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

func TestSlogObserver(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	o := advisory.NewSlogObserver(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx := context.Background()
	o.ObserveAcquire(ctx, advisory.Acquisition{Op: "try lock", Keys: []advisory.Key{advisory.Int64Key(1)}, Outcome: advisory.Busy})
	o.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: []advisory.Key{advisory.Int64Key(1)}, Err: advisory.ErrNotHeld})
	o.ObserveLoss(ctx, advisory.Loss{Key: advisory.PairKey(1, 2), Cause: errors.New("heartbeat: no answer")})
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="advisory: acquire" op="try lock" keys=[1]`, "outcome=busy",
		`level=WARN msg="advisory: release" op=unlock`, "lock not held",
		`level=WARN msg="advisory: lease lost" key=1:2 cause="heartbeat: no answer"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
