package main

// The help texts, as "pgadvisory help <command>" prints them after the usage
// line. docs/cli.md says the same at more length.

const helpExec = `
Exec runs command while holding a PostgreSQL advisory lock on KEY, as
flock(1) does with a file: one lock, one session, held from before the
command starts until after it ends. The lock is a lease: a heartbeat proves
every interval that the session still holds it.

KEY is a number (42), a pair of numbers (7:12), or NAMESPACE:NAME (7:nightly),
which takes the same lock as pg_advisory_lock(7, hashtext('nightly')); it is
read as advisory.ParseKey reads it. See 'pgadvisory help keys'. A negative
KEY goes after "--":
pgadvisory exec -- -42 -- command.

The command inherits stdin, stdout and stderr, and its environment gains
PGADVISORY_KEY, the key as a number or pair, and PGADVISORY_TOKEN, the lease's
fencing token: it grows with each holder of the key, so a resource that
records the highest token it has seen can refuse a holder that lost its lock.
The signals pgadvisory receives (INT, TERM, HUP, QUIT, USR1, USR2, WINCH) are
passed on to the command, and its exit code is pgadvisory's. While
pgadvisory still waits for the lock, a signal ends the wait: pgadvisory exits
once the server has ended its session, so no wait is left behind. If
pgadvisory is killed (SIGKILL), the server ends a waiting session within
about a second (PostgreSQL 14 and later), and on Linux the command is killed
with pgadvisory; elsewhere it runs on without the lock.

If the lock is lost while the command runs (its session was terminated, the
server restarted or stopped answering), pgadvisory says so and why, sends the
command SIGTERM, then SIGKILL after the grace period, and exits with 75.
A loss is noticed within two heartbeat intervals.

The flags are:

	-n, --nonblock
		Fail at once if another session holds the lock.
	-w, --wait d
		Fail if the lock is not granted within d (30s, 1m, or a number of
		seconds); -w 0 does not wait, as -n. Without -n or -w, wait as
		long as it takes.
	-s, --shared
		Take a shared lock, which other shared holders may hold too.
	-E, --conflict-exit-code code
		Exit with code when -n finds the lock held or -w runs out (default 1).
	--heartbeat d
		Prove the lock every d (default 5s).
	--grace d
		After a loss, wait d between SIGTERM and SIGKILL (default 10s).
	--lost-exit-code code
		Exit with code after a loss (default 75).
	--no-fencing
		Take no fencing token (PGADVISORY_TOKEN is 0). Tokens come from the
		sequence pgadvisory.fencing_token, one per database, which the first
		use creates (this needs CREATE on the database).
	--dsn dsn
		The database; see 'pgadvisory help connect'.

Exit codes:

	the command's   the command ran; a command killed by signal N gives 128+N
	1 (or -E)       the lock is held elsewhere (-n), or the wait ran out (-w)
	2               the command line is wrong
	69              the lock could not be taken: no connection, a server
	                error, a hot standby, a transaction pooler, a deadlock
	75              the lock was lost while the command ran
	126, 127        the command could not be run, or was not found
	128+N           pgadvisory got signal N while waiting for the lock

Flags go before KEY. Each takes one dash or two, and short flags do not
combine: -n -s, not -ns.
`

const helpLocks = `
Locks lists the advisory locks held and awaited in the current database:
one row per session, key and mode, with the key decoded, its namespace's name
from the dictionary table (pgadvisory.namespaces, when it exists), the mode,
whether it is held or awaited, the backend's PID, application name, user,
session state, an age, and the PIDs that block a waiter. A table of who
blocks whom follows when anyone waits.

AGE is how long a waiter has waited; for a holder, it is how long its session
has been in its current state, since PostgreSQL does not record when a lock
was granted. Without the pg_monitor role, other roles' sessions show no state.

The flags are:

	-j, --json
		Print a JSON array of locks instead of a table.
	--watch d
		Print again every d until interrupted. With --json, one array a line.
	-a, --all-databases
		List the locks of every database on the server.
	--dsn dsn
		The database; see 'pgadvisory help connect'.
`

const helpKey = `
Key prints the keys that each NAME or KEY maps to, the Go that builds them,
and the SQL a psql script would use to take the same lock.

NAMESPACE:NAME is the pair key (NAMESPACE, hashtext(NAME)), the key
advisory.NameKey builds. A NAME alone is shown both as hashtext(NAME) and as
hashtextextended(NAME, 0), the two bigint keys hand-written SQL commonly
takes; exec does not accept a bare name, since it would not know which one is
meant. Numbers and pairs are shown as they are.

The database is needed only for a namespace written as a name, which is
looked up in the dictionary table.

The flags are:

	--dsn dsn
		The database; see 'pgadvisory help connect'.
`

const helpRelease = `
Release ends the session of backend N with pg_terminate_backend, which makes
the server release every lock that session held, advisory or not, and roll
back its transaction. It lists what N holds and awaits, and refuses to end it
without --force. The role needs the right to signal N's backend: a superuser,
the same role, or a member of pg_signal_backend.

The flags are:

	-p, --pid N
		The backend to end, as 'pgadvisory locks' shows it.
	-f, --force
		End it.
	--dsn dsn
		The database; see 'pgadvisory help connect'.
`

const helpConnect = `
Pgadvisory connects to the database named by, in order:

	--dsn dsn       a URL (postgres://user@host:5432/db?sslmode=disable)
	                or keyword/value pairs (host=db user=app dbname=app)
	DATABASE_URL    the same forms
	PG* variables   PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE,
	                PGAPPNAME, PGSERVICE and the rest that psql reads, and
	                ~/.pgpass

The variables also fill in what a DSN leaves out, as in psql. Unless the DSN
or PGAPPNAME names one, the session's application_name is "pgadvisory exec",
"pgadvisory locks" and so on. Passwords are never printed: messages show
xxxxx in their place.
`

const helpKeys = `
A KEY argument is one of:

	42                the bigint key 42: pg_advisory_lock(42)
	7:12              the pair key (7, 12): pg_advisory_lock(7, 12)
	7:nightly         the pair (7, hashtext('nightly')), advisory.NameKey(7, "nightly")
	7:"2024"          the pair (7, hashtext('2024')): a quoted name
	billing:nightly   the same as 7:nightly, where the dictionary table
	                  pgadvisory.namespaces names namespace 7 "billing"

This is the grammar of advisory.ParseKey, which Go programs use to read a
key from a flag or a configuration file, with one addition: a namespace
written as a name, which only the command can look up, in the dictionary
table; a name it does not hold is an error.

The two kinds of key never conflict: 42 and 0:42 are different locks.
Numbers are decimal, as Key.String writes them: no '+', no leading zeros.
The namespace is an int4. After the colon, text that begins with a digit or
a sign is a number; anything else is a name, hashed as PostgreSQL's
hashtext hashes it, on the client. Quote a name, in double quotes as in Go,
when it begins with a digit, a sign, a colon, a quote or white space, ends
with white space, or is empty: 7:"2024-report". In the shell, put the whole
KEY in single quotes: '7:"2024-report"'.

'pgadvisory key NAME' shows what a name maps to.
`
