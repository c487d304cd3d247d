package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRun runs the program's core on every server and driver.
func TestRun(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out strings.Builder
		if err := run(ctx, tg.DB, &out); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		for _, want := range []string{
			"second request for order 42:       409 Conflict (Retry-After: 1): conflict: resource busy, retry later",
			"request for order 43:              200 OK: order 43: payment 1 recorded",
			"first request for order 42:        200 OK: order 42: payment 1 recorded",
			"order 42 again, now free:          200 OK: order 42: payment 2 recorded",
			"malformed id:                      400 Bad Request: bad request: invalid resource key",
			"order 42 has 2 payment(s) in the database",
			"ok: one request per order at a time; every 200 was committed before it was sent",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		if n := tg.DB.Stats().InUse; n != 0 {
			t.Errorf("%d connections still in use", n)
		}
	})
}
