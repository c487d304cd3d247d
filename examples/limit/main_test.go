package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestProgram runs the program as main does, through DATABASE_URL, on
// every server and driver, and on a pgx pool, and checks what it prints.
func TestProgram(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) { testProgram(t, tg.Server, tg.Driver) })
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name+"/"+pgtest.DriverPGXPool, func(t *testing.T) { testProgram(t, s, pgtest.DriverPGXPool) })
	}
}

// testProgram runs the program on s with driver and checks what it prints.
func testProgram(t *testing.T, s *pgtest.Server, driver string) {
	t.Setenv("DATABASE_URL", s.DSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out, driver, 8, 3, 3); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"(DATABASE_URL)\n", "8 workers ran 24 jobs, at most ", " at once (limit 3)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunBadConfig(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@invalid.invalid/none")
	if err := run(context.Background(), &strings.Builder{}, pgtest.DriverPQ, 1, 0, 1); err == nil {
		t.Fatal("run with no slot accepted")
	}
}
