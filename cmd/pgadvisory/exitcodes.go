package main

// Exit codes of exec, besides the command's own, which exec passes on.
// They follow flock(1) where flock has one and sysexits.h and the shell
// elsewhere; docs/cli.md lists them.
const (
	// exitConflict is the default of -E: the lock was held elsewhere
	// (with -n) or the wait ran out (with -w), as flock(1) does.
	exitConflict = 1
	// exitUnavailable (EX_UNAVAILABLE) means the lock could not be taken
	// for another reason: no connection, a server error, a deadlock,
	// a hot standby, a transaction pooler, or an interrupt while waiting.
	exitUnavailable = 69
	// exitLost (EX_TEMPFAIL) means the lock was lost while the command ran:
	// the command was stopped, and another holder may have run meanwhile.
	exitLost = 75
	// exitCannotRun and exitNotFound are the shell's codes for a command
	// that exists but cannot run, and for one that does not exist.
	exitCannotRun = 126
	exitNotFound  = 127
	// exitSignal plus a signal's number is the code of a command killed
	// by that signal, as the shell reports it.
	exitSignal = 128
)
