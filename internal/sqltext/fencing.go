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

// drawCounter is the expression that draws the next value of
// [FencingSequence], the counter of a fencing token:
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
const drawCounter = "pg_catalog.nextval(COALESCE(pg_catalog.to_regclass('" + FencingSequence + "'), " +
	`'pg_catalog."` + FencingSequence + `"'::pg_catalog.text::pg_catalog.regclass))`

// The layout of a fencing token, an int64 that is never negative: the
// server's timeline in bits 40 to 62, the counter drawn from
// [FencingSequence] in bits 0 to 39.
//
//	token = timeline<<40 | counter
//
// The timeline grows at every promotion of a standby (and at the end of
// every archive recovery), so a token drawn after a failover is greater
// than every token the old primary handed out, even those whose WAL never
// reached the standby: those carry the old timeline. Within a timeline the
// counter grows. Tokens of earlier releases were the counter alone, below
// 1<<40, so they are smaller than any token of timeline 1 or later.
const (
	// tokenCounterBits is the width of the counter.
	tokenCounterBits = 40
	// maxTokenCounter is the greatest counter a token holds; a greater
	// value fails the statement that draws it, rather than wrap.
	maxTokenCounter = 1<<tokenCounterBits - 1
	// maxTokenTimeline is the greatest timeline a token holds, so that
	// the token fits an int64.
	maxTokenTimeline = 1<<(63-tokenCounterBits) - 1
)

// timeline is the expression that reads the server's current timeline,
// as an int8: the first 8 hex digits of the name of the WAL file that
// pg_current_wal_lsn falls in. pg_walfile_name names the file with the
// timeline new WAL is written on, which a promoted standby switches to
// as soon as it accepts writes, before its end-of-recovery checkpoint
// completes (pg_control_checkpoint() still shows the old one until then,
// and needs a privilege an ordinary role lacks). Both functions fail on a
// standby, where no token is drawn.
const timeline = "('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))" +
	"::pg_catalog.bit(32)::pg_catalog.int8"

// syncCommit is the expression that makes the commit of the statement's
// transaction wait for its WAL to be flushed, whatever the session's,
// role's or server's synchronous_commit: it sets synchronous_commit to
// local for the rest of the transaction (set_config's true) when it is
// off, and leaves any other value, each of which flushes the commit
// locally. PostgreSQL reads the setting when the transaction commits.
// In an implicit transaction, the statement's own, the setting ends with
// the statement; in a transaction block the caller opened, it lasts until
// that block ends. It returns the setting in force, never NULL.
const syncCommit = "CASE WHEN pg_catalog.current_setting('synchronous_commit') = 'off' " +
	"THEN pg_catalog.set_config('synchronous_commit', 'local', true) " +
	"ELSE pg_catalog.current_setting('synchronous_commit') END"

// nextToken is the expression that draws the next fencing token (see
// [tokenCounterBits] for its layout), a durable one:
//
//	(SELECT CASE WHEN f.n BETWEEN 1 AND 1099511627775 AND f.l BETWEEN 1
//	AND 8388607 THEN f.l << 40 | f.n ELSE ('advisory: fencing: counter '
//	|| f.n || ' of pgadvisory.fencing_token on timeline ' || f.l || ' does
//	not fit a fencing token')::pg_catalog.int8 END FROM (SELECT CASE WHEN
//	(CASE WHEN pg_catalog.current_setting('synchronous_commit') = 'off'
//	THEN pg_catalog.set_config('synchronous_commit', 'local', true) ELSE
//	...) IS NOT NULL THEN pg_catalog.nextval(...) END AS n, ('x' ||
//	pg_catalog.substr(pg_catalog.pg_walfile_name(
//	pg_catalog.pg_current_wal_lsn()), 1, 8))::pg_catalog.bit(32)::
//	pg_catalog.int8 AS l OFFSET 0) AS f)
//
// A value that nextval hands out is not durable when it is returned: with
// synchronous_commit off, a crash can lose the WAL record that covers it,
// and the sequence hands it out again. nextval gives the transaction an
// ID whenever it writes WAL, so its commit flushes that record when
// synchronous_commit is not off; syncCommit, evaluated first (CASE orders
// it), sees to that, within the same statement. The result reaches the
// client after the commit, since the server sends it with the
// transaction's end; in a transaction block of the caller's, the token is
// durable once that block commits.
//
// A counter beyond [maxTokenCounter], or a timeline beyond
// [maxTokenTimeline], fails the statement with SQLSTATE 22P02 and a
// message that says so, rather than wrap: the cast of that text to int8
// fails, and only then, since it depends on the row.
const nextToken = "(SELECT CASE WHEN f.n BETWEEN 1 AND " + maxCounter + " AND f.l BETWEEN 1 AND " + maxTimeline +
	" THEN f.l << " + counterBits + " | f.n ELSE ('advisory: fencing: counter ' || f.n || ' of " + FencingSequence +
	" on timeline ' || f.l || ' does not fit a fencing token')::pg_catalog.int8 END " +
	"FROM (SELECT CASE WHEN (" + syncCommit + ") IS NOT NULL THEN " + drawCounter + " END AS n, " +
	timeline + " AS l OFFSET 0) AS f)"

// The layout's numbers as SQL text.
const (
	counterBits = "40"
	maxCounter  = "1099511627775"
	maxTimeline = "8388607"
)

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
