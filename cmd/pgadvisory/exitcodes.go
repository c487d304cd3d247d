package main

// The exit codes of every command; docs/cli.md lists them, and so does
// "pgadvisory help exit-codes". They follow flock(1) where flock has one
// (1 for a lock held elsewhere, 64 for a wrong command line),
// sysexits.h elsewhere, and the shell for a command that exec runs. Besides
// these, exec exits with its command's own code.
const (
	exitOK = 0
	// exitError means the command failed for a reason of its own: a
	// namespace the dictionary table does not name (key, exec), a PID with
	// no advisory lock or that the server did not end (release), an
	// address serve cannot listen on.
	exitError = 1
	// exitConflict is the default of exec's -E: the lock was held
	// elsewhere (with -n) or the wait ran out (with -w), as flock(1) does.
	exitConflict = 1
	// exitUsage (EX_USAGE) means the command line was wrong.
	exitUsage = 64
	// exitUnavailable (EX_UNAVAILABLE) means the database could not do
	// what was asked, in every command: no connection, a server error, a
	// hot standby, a transaction pooler in the way, a deadlock, or (exec)
	// an interrupt while waiting for the lock.
	exitUnavailable = 69
	// exitLost (EX_TEMPFAIL) means exec lost the lock while the command
	// ran: the command was stopped, and another holder may have run
	// meanwhile.
	exitLost = 75
	// exitCannotRun and exitNotFound are the shell's codes for a command
	// that exists but cannot run, and for one that does not exist.
	exitCannotRun = 126
	exitNotFound  = 127
	// exitSignal plus a signal's number is the code of a command killed
	// by that signal, as the shell reports it, and of exec interrupted by
	// that signal while it waits for the lock.
	exitSignal = 128
)
