package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestProgram runs the program and checks the counts it exports.
func TestProgram(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Setenv("DATABASE_URL", tg.Server.DSN)
		var out bytes.Buffer
		if err := run(context.Background(), &out, tg.Driver, ""); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		for _, want := range []string{
			`pgadvisory_acquisitions_total{op="try xact lock",outcome="acquired"} 3`,
			`pgadvisory_acquisitions_total{op="try xact lock",outcome="busy"} 1`,
			`pgadvisory_acquisitions_total{op="lock",outcome="acquired"} 1`,
			`pgadvisory_releases_total{op="xact end",result="ok"} 3`,
			`pgadvisory_releases_total{op="unlock",result="ok"} 1`,
			`pgadvisory_wait_seconds_count{op="lock"} 1`,
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}
