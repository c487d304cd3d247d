package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestProgram runs the program on every server and driver and checks that
// the stale holder's write was refused and that it learnt of its loss.
func TestProgram(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Setenv("DATABASE_URL", tg.Server.DSN)
		var out bytes.Buffer
		if err := run(context.Background(), &out, tg.Driver); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		for _, want := range []string{
			"second scheduler's write: accepted",
			"first scheduler's write: refused",
			"first scheduler learns it lost the lease: advisory: lease",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}
