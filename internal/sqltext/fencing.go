package sqltext

// FencingSequence names the sequence whose values are fencing tokens: one
// per database, in [Schema], whatever the search_path of the session that
// draws from it.
const FencingSequence = Schema + "." + fencingSequenceName

// fencingSequenceName is [FencingSequence] without its schema.
const fencingSequenceName = "fencing_token"

// LegacyFencingSequence names the sequence of releases before
// [FencingSequence], which they created, unqualified, in the first schema
// of each session's search_path.
const LegacyFencingSequence = "pgadvisory_fencing_token"

// nextToken is the expression that draws the next fencing token:
//
//	pg_catalog.nextval(COALESCE(pg_catalog.to_regclass('pgadvisory.fencing_token'),
//	'pg_catalog."pgadvisory.fencing_token"'::pg_catalog.text::pg_catalog.regclass))
//
// When the sequence exists it is nextval('pgadvisory.fencing_token').
// When it does not, the statement fails with SQLSTATE 42P01, the signal
// to create it ([CreateFencingSequence]), whether or not its schema
// exists: PostgreSQL 15 reports a missing schema as 3F000, so a missing
// sequence is looked up in pg_catalog instead, which always exists and
// never holds it. The cast from text runs only when to_regclass finds
// nothing. A role without USAGE on the schema fails with 42501 in
// to_regclass, and one without USAGE on the sequence in nextval.
const nextToken = "pg_catalog.nextval(COALESCE(pg_catalog.to_regclass('" + FencingSequence + "'), " +
	`'pg_catalog."` + FencingSequence + `"'::pg_catalog.text::pg_catalog.regclass))`

// CreateFencingSequence creates [FencingSequence], the first time a
// fencing token is drawn on a database, and [Schema] if it is missing.
// Its three statements go in one message, so they run as one
// transaction:
//
//	CREATE SCHEMA IF NOT EXISTS pgadvisory; CREATE SEQUENCE
//	pgadvisory.fencing_token; SELECT pg_catalog.setval(
//	'pgadvisory.fencing_token', s.m) FROM (SELECT pg_catalog.max(last_value)
//	AS m FROM pg_catalog.pg_sequences WHERE sequencename =
//	'pgadvisory_fencing_token') AS s WHERE s.m IS NOT NULL
//
// The new sequence starts after the greatest value of every sequence of
// an earlier release ([LegacyFencingSequence], in any schema) that the
// role may read, so that tokens do not go back on an upgrade. The schema,
// the sequence and its start become visible together, at commit. A
// session that creates them at the same time as another fails, with
// SQLSTATE 23505 or 42P07, and finds the other's sequence when it draws
// again. CREATE SEQUENCE has no IF NOT EXISTS: a sequence found existing
// fails the transaction rather than have setval move it.
//
// It needs CREATE on the database (for CREATE SCHEMA, even when the
// schema exists) and, when the schema is someone else's, CREATE on it.
const CreateFencingSequence = CreateSchema + "; CREATE SEQUENCE " + FencingSequence +
	"; SELECT pg_catalog.setval('" + FencingSequence + "', s.m) FROM (SELECT pg_catalog.max(last_value) AS m " +
	"FROM pg_catalog.pg_sequences WHERE sequencename = '" + LegacyFencingSequence + "') AS s WHERE s.m IS NOT NULL"

// FencingPrivileges returns one row that tells which privilege fencing
// tokens need and the current role lacks: the role's name, quoted as an
// identifier; whether it has CREATE on the database; whether [Schema]
// exists, and whether the role has USAGE and CREATE on it; whether
// [FencingSequence] exists, and whether the role has USAGE on it. It reads
// the catalogs directly, so it needs no privilege itself.
const FencingPrivileges = "SELECT pg_catalog.quote_ident(CURRENT_USER), " +
	"pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'), " +
	"n.oid IS NOT NULL, " +
	"COALESCE(pg_catalog.has_schema_privilege(n.oid, 'USAGE'), false), " +
	"COALESCE(pg_catalog.has_schema_privilege(n.oid, 'CREATE'), false), " +
	"c.oid IS NOT NULL, " +
	"COALESCE(pg_catalog.has_sequence_privilege(c.oid, 'USAGE'), false) " +
	"FROM (VALUES (1)) AS o(o) " +
	"LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = '" + Schema + "' " +
	"LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = '" + fencingSequenceName + "'"
