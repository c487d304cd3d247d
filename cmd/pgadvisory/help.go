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

The command inherits stdin, stdout and stderr, and an environment that names
the connection pgadvisory used, so that psql and other libpq programs reach
the same database: PGHOST, PGPORT, PGDATABASE, PGUSER, PGSSLMODE and every
other setting of the DSN that libpq has a variable for (PGPASSWORD only when
the DSN holds the password; nothing is added to the command's arguments).
With --dsn, DATABASE_URL is that DSN, or is removed when the DSN is
keyword/value pairs. The environment also gains:

	PGADVISORY_LOCK_KEY       the key of the lock held, as 42 or 7:2091003772
	PGADVISORY_FENCING_TOKEN  the lease's fencing token (not with --no-fencing)
	PGADVISORY_SLOT           with --limit, the slot held, from 0
	PGADVISORY_LIMIT          with --limit, the number of slots

A fencing token grows with each holder of the key, so a resource that
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
		seconds). -w 0 does not wait: it is -n, as the library's Wait(0)
		is Try. Without -n or -w, wait as long as it takes.
	-s, --shared
		Take a shared lock, which other shared holders may hold too, and
		which waits while an exclusive holder holds the key.
	--limit N
		Run under one of N slots, as a semaphore: at most N commands
		run at once across every pgadvisory exec --limit N with the same
		KEY. The slots are the N keys from KEY (for 7:100, 7:100 to
		7:100+N-1; for 42, 42 to 42+N-1), which nothing else may lock.
	-E, --conflict-exit-code code
		Exit with code when -n finds the lock held or -w runs out (default 1).
	--heartbeat d
		Prove the lock every d (default 5s).
	--grace d
		After a loss, wait d between SIGTERM and SIGKILL (default 10s).
	--lost-exit-code code
		Exit with code after a loss (default 75).
	--no-fencing
		Take no fencing token (PGADVISORY_FENCING_TOKEN is not set). Tokens
		come from the sequence pgadvisory.fencing_token, one per database,
		which the first use creates (this needs CREATE on the database).
	--no-pg-env
		Leave the command's PG* variables and DATABASE_URL as pgadvisory
		found them.
	--dsn dsn
		The database; see 'pgadvisory help connect'.

When -n finds the lock held, or -w runs out, the message names the
sessions that hold it: their PID, application_name, and their session's
age, which bounds how long they have held it.

Exit codes ('pgadvisory help exit-codes' has every command's):

	the command's   the command ran; a command killed by signal N gives 128+N
	1 (or -E)       the lock is held elsewhere (-n), or the wait ran out (-w)
	64              the command line is wrong
	69              the lock could not be taken: no connection, a server
	                error, a hot standby, a transaction pooler, a deadlock
	75              the lock was lost while the command ran
	126, 127        the command could not be run, or was not found
	128+N           pgadvisory got signal N while waiting for the lock

Flags go before KEY. Each takes one dash or two, and one-letter flags
combine: -ns is -n -s, -sw30s is -s -w 30s.
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
		Print again every d until interrupted. On a terminal the screen
		is cleared first; in a file or a pipe each refresh is a block
		that begins with its time, after a blank line. With --json, one
		array a line.
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
looked up in the dictionary table on the server; without a database, write
the namespace's number (7:nightly).

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
xxxxx in their place. A server that cannot be reached is exit code 69 in
every command.

exec hands the connection it used on to its command, as PGHOST, PGPORT,
PGDATABASE, PGUSER and libpq's other variables, so that psql under exec
reaches the same database; see 'pgadvisory help exec'.
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

const helpExitCodes = `
Every command exits with one of these codes (sysexits.h, and flock(1)
where flock has one):

	0      done
	1      exec: the lock is held elsewhere (-n) or the wait ran out (-w),
	       unless -E says another code; release: the PID holds no advisory
	       lock, is this command's session, or the server did not end it;
	       serve: it cannot listen on the address, or stopped with an error
	64     the command line is wrong (EX_USAGE): a flag, a KEY, a namespace
	       name the dictionary table does not hold, release without --force
	69     the database is unavailable (EX_UNAVAILABLE): no connection, a
	       server error, a hot standby, a transaction pooler in the way, a
	       deadlock
	75     exec: the lock was lost while the command ran (or
	       --lost-exit-code)
	126    exec: the command could not be run
	127    exec: the command was not found
	128+N  exec: the command was killed by signal N, or pgadvisory got
	       signal N while waiting for the lock

Otherwise exec exits with its command's code.
`
