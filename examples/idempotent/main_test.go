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

// TestIdempotent runs the program on every server and driver, and on a
// pgx pool. The program checks the balances itself; the test also checks
// what it printed.
func TestIdempotent(t *testing.T) {
	// run drops its tables by fixed names, so the runs take turns.
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) { testIdempotent(t, tg.Server, tg.Driver) })
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name+"/"+pgtest.DriverPGXPool, func(t *testing.T) { testIdempotent(t, s, pgtest.DriverPGXPool) })
	}
}

// testIdempotent runs the program on s with driver and checks what it
// printed.
func testIdempotent(t *testing.T, s *pgtest.Server, driver string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv("DATABASE_URL", s.DSN)
	var out bytes.Buffer
	if err := run(ctx, &out, driver, 40, 5, 6); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"200 deliveries: 40 applied", "exactly once: the balances add up to 40"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
