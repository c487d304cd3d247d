package mock

import (
	"database/sql/driver"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// ProbeEngine makes the database that [New] or [NewDB] creates ask which
// engine serves it, as advisory does on a real driver: the first lock
// call on the *sql.DB sends one query, which the test answers with
// [ExpectEngine]; later calls send nothing. Without ProbeEngine, a mock
// is taken for PostgreSQL and the query is never sent, so that
// expectations written without it still hold. A mock made by
// sqlmock.New is never probed.
func ProbeEngine() Option { return func(c *config) { c.probe = true } }

// An Engine is what a server answers to the query with which advisory
// identifies it (see docs/engines.md). The values below answer as the
// engines do; set the fields for other releases.
type Engine struct {
	Version         string // what version() returns
	ApplicationName string // the session's application_name
	YBAdvisoryLocks string // yb_enable_advisory_locks; "" where the server has no such setting
	YBSilence       string // yb_silence_advisory_locks_not_supported_error; "" where absent
	NeonTimeline    string // neon.timeline_id; "" where absent
	Citus           string // the citus extension's version; "" where it is not installed
	CitusGroup      int32  // the node's group, with Citus: 0 on the coordinator
}

// The engines as their servers answer. Each lock call on PostgreSQL, Neon
// and a Citus coordinator goes on; on the others, session locks, and on
// some transaction locks too, fail with an error matching
// [advisory.ErrUnsupportedEngine] before anything else is sent.
var (
	// PostgreSQL is PostgreSQL 17: nothing is refused.
	PostgreSQL = Engine{Version: "PostgreSQL 17.2 (Debian 17.2-1.pgdg120+1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit"}

	// Neon is PostgreSQL on Neon, reached at its direct host: nothing is
	// refused.
	Neon = Engine{Version: PostgreSQL.Version, NeonTimeline: "8f4c3d8ab0a7f2a1e1b3c9d4e5f60718"}

	// Supavisor is PostgreSQL behind Supavisor, whose connections to the
	// server are named "Supavisor": session locks are refused.
	Supavisor = Engine{Version: PostgreSQL.Version, ApplicationName: "Supavisor"}

	// CitusCoordinator is a Citus coordinator: nothing is refused.
	CitusCoordinator = Engine{Version: PostgreSQL.Version, Citus: "13.0-1"}

	// CitusWorker is a Citus worker, in group 2: every lock is refused.
	CitusWorker = Engine{Version: PostgreSQL.Version, Citus: "13.0-1", CitusGroup: 2}
)

// CockroachDB returns the answer of CockroachDB release, such as "v23.1.11"
// or "v26.3.0": session locks are refused, and so are transaction locks
// before v26.3.
func CockroachDB(release string) Engine {
	return Engine{Version: "CockroachDB CCL " + release + " (x86_64-pc-linux-gnu, built 2026/07/01 12:00:00, go1.23.7 X:nocoverageredesign)"}
}

// YugabyteDB returns the answer of YugabyteDB release, such as
// "2025.1.0.0", with its settings yb_enable_advisory_locks (locks) and
// yb_silence_advisory_locks_not_supported_error (silenced): every lock is
// refused unless locks is set. Releases before 2.25 have no
// yb_enable_advisory_locks: set YBAdvisoryLocks to "" for them.
func YugabyteDB(release string, locks, silenced bool) Engine {
	return Engine{
		Version:         "PostgreSQL 15.12-YB-" + release + "-b0 on x86_64-pc-linux-gnu, compiled by clang version 17.0.6, 64-bit",
		YBAdvisoryLocks: onOff(locks),
		YBSilence:       onOff(silenced),
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// ExpectEngine expects the query that identifies the server, sent by the
// first lock call on a database made with [ProbeEngine], and answers it
// as e. On Citus it also expects the query that reads the node's group.
// It returns the first expectation: chain WillReturnError to it to fail
// the probe, as a broken connection would, and answer with an e that has
// no Citus.
func ExpectEngine(m sqlmock.Sqlmock, e Engine) *sqlmock.ExpectedQuery {
	q := m.ExpectQuery(pattern(m, sqltext.EngineProbe)).WithoutArgs().WillReturnRows(
		sqlmock.NewRows([]string{"version", "application_name", "yb_enable_advisory_locks",
			"yb_silence_advisory_locks_not_supported_error", "neon.timeline_id", "extversion"}).
			AddRow(e.Version, e.ApplicationName, null(e.YBAdvisoryLocks), null(e.YBSilence),
				null(e.NeonTimeline), null(e.Citus)))
	if e.Citus != "" {
		m.ExpectQuery(pattern(m, sqltext.CitusGroup)).WithoutArgs().
			WillReturnRows(sqlmock.NewRows([]string{"groupid"}).AddRow(int64(e.CitusGroup)))
	}
	return q
}

// null is s, or NULL when s is empty.
func null(s string) driver.Value {
	if s == "" {
		return nil
	}
	return s
}
