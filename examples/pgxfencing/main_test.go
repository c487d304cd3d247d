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

// TestProgram runs the program as main does, through DATABASE_URL, on
// every server, twice, and checks that the second scheduler's token is the
// newer one, that the stale holder's write was refused, and that it learnt
// of its loss. The example has no driver to vary: it is pgx's own API.
func TestProgram(t *testing.T) {
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", s.DSN)
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var out bytes.Buffer
				if err := run(ctx, &out); err != nil {
					t.Fatalf("%v\n%s", err, out.String())
				}
				for _, want := range []string{
					"(DATABASE_URL)\n",
					"second scheduler's write: accepted",
					"first scheduler's write: refused",
					"first scheduler learns it lost the lease: advisory: lease",
				} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("output lacks %q:\n%s", want, out.String())
					}
				}
			}
		})
	}
}
