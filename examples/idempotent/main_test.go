package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestIdempotent runs the program on every server and driver. The
// program checks the balances itself; the test also checks what it
// printed.
func TestIdempotent(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		// run drops its tables by fixed names, so the runs take turns.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		t.Setenv("DATABASE_URL", tg.Server.DSN)
		var out bytes.Buffer
		if err := run(ctx, &out, tg.Driver, 40, 5, 6); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		for _, want := range []string{"200 deliveries: 40 applied", "exactly once: the balances add up to 40"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}
