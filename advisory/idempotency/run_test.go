package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/idempotency"
)

// TestRunBadInput checks that bad arguments and options are errors, not
// panics, and that none of them reaches the database: the *sql.DB here
// has no driver behind it.
func TestRunBadInput(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(nil)
	nop := func(ctx context.Context, tx *sql.Tx) ([]byte, error) { return nil, nil }
	tests := []struct {
		name string
		db   *sql.DB
		key  string
		fn   idempotency.Func
		opts []idempotency.RunOption
		want error // nil: any error
	}{
		{name: "NilDB", key: "k", fn: nop},
		{name: "NilFunc", db: db, key: "k"},
		{name: "EmptyKey", db: db, fn: nop, want: idempotency.ErrBadKey},
		{name: "LongKey", db: db, key: strings.Repeat("k", idempotency.MaxKeyLen+1), fn: nop, want: idempotency.ErrBadKey},
		{name: "InvalidUTF8", db: db, key: "k\xff", fn: nop, want: idempotency.ErrBadKey},
		{name: "NUL", db: db, key: "k\x00", fn: nop, want: idempotency.ErrBadKey},
		{name: "QuotedTable", db: db, key: "k", fn: nop, opts: []idempotency.RunOption{idempotency.Table(`ops"; DROP TABLE x; --`)}, want: idempotency.ErrBadOption},
		{name: "ThreePartTable", db: db, key: "k", fn: nop, opts: []idempotency.RunOption{idempotency.Table("a.b.c")}, want: idempotency.ErrBadOption},
		{name: "NegativeWait", db: db, key: "k", fn: nop, opts: []idempotency.RunOption{idempotency.Wait(-time.Second)}, want: idempotency.ErrBadOption},
		{name: "WaitTooLong", db: db, key: "k", fn: nop, opts: []idempotency.RunOption{idempotency.Wait((math.MaxInt32 + 1) * time.Millisecond)}, want: idempotency.ErrBadOption},
		{name: "LastWaitCounts", db: db, key: "k", fn: nop, opts: []idempotency.RunOption{idempotency.Wait(time.Second), idempotency.Wait(-time.Second)}, want: idempotency.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := idempotency.Run(context.Background(), tt.db, tt.key, tt.fn, tt.opts...)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || res.Outcome != 0 || res.Value != nil {
				t.Errorf("Run = %+v, %v; want a zero Result and an error matching %v", res, err, tt.want)
			}
			if tt.want == idempotency.ErrBadOption && !errors.Is(err, advisory.ErrBadOption) {
				t.Errorf("Run = %v; want an error that also matches advisory.ErrBadOption", err)
			}
		})
	}
	if _, err := idempotency.Purge(context.Background(), db, -time.Second); !errors.Is(err, idempotency.ErrBadOption) || !errors.Is(err, advisory.ErrBadOption) {
		t.Errorf("Purge with a negative age = %v, want idempotency's and advisory's ErrBadOption", err)
	}
	if err := idempotency.Setup(context.Background(), db, idempotency.Table("1abc")); !errors.Is(err, idempotency.ErrBadOption) {
		t.Errorf("Setup with a bad table = %v, want ErrBadOption", err)
	}
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	for o, want := range map[idempotency.Outcome]string{
		idempotency.Ran: "ran", idempotency.Done: "done", idempotency.InProgress: "in progress", 0: "Outcome(0)",
	} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}
