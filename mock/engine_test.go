package mock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// engines lists each engine's answer, and which locks the library refuses
// on it.
var engines = []struct {
	name          string
	engine        mock.Engine
	want          string // the engine the refusal names
	session, xact bool   // refused
}{
	{"PostgreSQL", mock.PostgreSQL, "PostgreSQL", false, false},
	{"Neon", mock.Neon, "Neon", false, false},
	{"Supavisor", mock.Supavisor, "Supavisor", true, false},
	{"SupavisorLowerCase", mock.Engine{Version: mock.PostgreSQL.Version, ApplicationName: "supavisor"}, "Supavisor", true, false},
	{"CitusCoordinator", mock.CitusCoordinator, "Citus", false, false},
	{"CitusWorker", mock.CitusWorker, "Citus", true, true},
	{"CockroachDB23.1", mock.CockroachDB("v23.1.11"), "CockroachDB", true, true},
	{"CockroachDB26.2", mock.CockroachDB("v26.2.4"), "CockroachDB", true, true},
	{"CockroachDB26.3", mock.CockroachDB("v26.3.0"), "CockroachDB", true, false},
	{"CockroachDB27.1", mock.CockroachDB("v27.1.0-alpha.1"), "CockroachDB", true, false},
	{"YugabyteDB2.20", mock.Engine{Version: "PostgreSQL 11.2-YB-2.20.1.0-b97 on x86_64-pc-linux-gnu, compiled by clang version 16.0.6, 64-bit"}, "YugabyteDB", true, true},
	{"YugabyteDB2.20Silenced", mock.Engine{Version: "PostgreSQL 11.2-YB-2.20.1.0-b97 on x86_64-pc-linux-gnu, compiled by clang version 16.0.6, 64-bit", YBSilence: "on"}, "YugabyteDB", true, true},
	{"YugabyteDB2025.1", mock.YugabyteDB("2025.1.0.0", true, false), "YugabyteDB", false, false},
	{"YugabyteDB2025.1Off", mock.YugabyteDB("2025.1.0.0", false, false), "YugabyteDB", true, true},
	{"YugabyteDB2025.1Silenced", mock.YugabyteDB("2025.1.0.0", false, true), "YugabyteDB", true, true},
}

// checkRefusal fails t unless err is a refusal naming want when refused
// is set, and nil otherwise.
func checkRefusal(t *testing.T, err error, refused bool, want string) {
	t.Helper()
	if !refused {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var ee *advisory.EngineError
	switch {
	case !errors.Is(err, advisory.ErrUnsupportedEngine):
		t.Fatalf("err = %v; want one matching advisory.ErrUnsupportedEngine", err)
	case !errors.As(err, &ee):
		t.Fatalf("err = %v; want an *advisory.EngineError in it", err)
	case ee.Engine != want || ee.Reason == "":
		t.Fatalf("EngineError = %+v; want engine %s and a reason", ee, want)
	}
}

// TestEngineAnswers runs the session and transaction locks against each
// engine's answer: the first call probes, a refused one sends nothing
// more, and a second call on the same *sql.DB sends no probe, whatever
// the answer was.
func TestEngineAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := advisory.Int64Key(42)
	for _, tt := range engines {
		t.Run(tt.name+"/Session", func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, mock.ProbeEngine())
			c := conn(t, db)
			mock.ExpectEngine(m, tt.engine)
			for range 2 {
				if !tt.session {
					mock.ExpectTryLock(m, key, true)
				}
				ok, err := advisory.TryLock(ctx, c, key)
				checkRefusal(t, err, tt.session, tt.want)
				if ok == tt.session {
					t.Fatalf("TryLock acquired %v", ok)
				}
			}
			// A refused lease and scope send nothing either.
			if tt.session {
				_, err := advisory.Acquire(ctx, db, key, advisory.Heartbeat(time.Hour))
				checkRefusal(t, err, true, tt.want)
				err = advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
					t.Error("fn ran under a refused lock")
					return nil
				})
				checkRefusal(t, err, true, tt.want)
			}
		})
		t.Run(tt.name+"/Xact", func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, mock.ProbeEngine())
			tx := begin(t, db, m)
			mock.ExpectEngine(m, tt.engine)
			if !tt.xact {
				mock.ExpectTryXactLock(m, key, true)
			}
			_, err := advisory.TryXactLock(ctx, tx, key)
			checkRefusal(t, err, tt.xact, tt.want)
			rollback(t, tx, m)
			// The scope begins, is refused, and rolls back, with no
			// second probe.
			m.ExpectBegin()
			if !tt.xact {
				mock.ExpectTryXactLock(m, key, true)
				m.ExpectCommit()
			} else {
				m.ExpectRollback()
			}
			err = advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { return nil })
			checkRefusal(t, err, tt.xact, tt.want)
		})
	}
}

// TestEngineLocker refuses a Locker's acquisition on an engine whose
// session locks are not real, before it opens a connection of its own.
func TestEngineLocker(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, mock.ProbeEngine())
	mock.ExpectEngine(m, mock.CockroachDB("v26.3.0"))
	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		_, err := lk.Acquire(ctx, advisory.Int64Key(7), advisory.Try())
		checkRefusal(t, err, true, "CockroachDB")
	}
	if err := lk.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEngineProbeFails does not take a probe that failed for an answer:
// the call fails with the probe's error, and the next call probes again.
// A session whose probe failed is discarded, as after a failed lock
// statement; a transaction is the caller's to roll back.
func TestEngineProbeFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := advisory.Int64Key(42)
	broken := errors.New("connection reset by peer")
	probeFailed := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, broken) || errors.Is(err, advisory.ErrUnsupportedEngine) {
			t.Fatalf("lock after a failed probe: %v; want the probe's error", err)
		}
	}
	t.Run("Session", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, mock.ProbeEngine())
		c := conn(t, db)
		mock.ExpectEngine(m, mock.PostgreSQL).WillReturnError(broken)
		_, err := advisory.TryLock(ctx, c, key)
		probeFailed(t, err)
		if err := c.PingContext(ctx); !errors.Is(err, sql.ErrConnDone) {
			t.Errorf("the session after a failed probe: %v; want it discarded", err)
		}
	})
	t.Run("Xact", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, mock.ProbeEngine())
		tx := begin(t, db, m)
		mock.ExpectEngine(m, mock.PostgreSQL).WillReturnError(broken)
		_, err := advisory.TryXactLock(ctx, tx, key)
		probeFailed(t, err)
		rollback(t, tx, m)
		tx = begin(t, db, m)
		mock.ExpectEngine(m, mock.CockroachDB("v24.1.0"))
		_, err = advisory.TryXactLock(ctx, tx, key)
		checkRefusal(t, err, true, "CockroachDB")
		rollback(t, tx, m)
	})
}

// TestEngineNotProbed takes a mock made without ProbeEngine for
// PostgreSQL, sending nothing.
func TestEngineNotProbed(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t)
	key := advisory.Int64Key(42)
	mock.ExpectTryLock(m, key, true)
	if ok, err := advisory.TryLock(context.Background(), conn(t, db), key); err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
}
