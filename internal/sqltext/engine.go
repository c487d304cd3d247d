package sqltext

// EngineProbe returns one row that identifies the server behind a
// connection, for the check that refuses engines whose advisory locks are
// not real (see docs/engines.md): version(); the session's
// application_name, which Supavisor sets to "Supavisor" on the connections
// it opens to the server; YugabyteDB's yb_enable_advisory_locks and
// yb_silence_advisory_locks_not_supported_error; Neon's neon.timeline_id;
// and the version of the citus extension. A setting the server does not
// have is NULL, and so is the extension's version where it is not
// installed.
//
// It reads settings and one catalog, needs no privilege, takes no lock
// and writes nothing. Every function and relation in it exists on
// PostgreSQL 9.6 and later, on YugabyteDB (PostgreSQL 11 and 15) and on
// CockroachDB; an engine that still refuses it is identified by
// [EngineVersion] alone.
const EngineProbe = "SELECT pg_catalog.version(), " +
	"pg_catalog.current_setting('application_name'), " +
	"pg_catalog.current_setting('yb_enable_advisory_locks', true), " +
	"pg_catalog.current_setting('yb_silence_advisory_locks_not_supported_error', true), " +
	"pg_catalog.current_setting('neon.timeline_id', true), " +
	"(SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'citus')"

// EngineVersion returns one row, version(): what identifies an engine
// that refused [EngineProbe].
const EngineVersion = "SELECT pg_catalog.version()"

// CitusGroup returns one row on a server with the citus extension: the
// node's group, 0 on the coordinator (and on a node that is in no cluster)
// and the worker's own group on a worker.
const CitusGroup = "SELECT g.groupid FROM pg_catalog.pg_dist_local_group g"
