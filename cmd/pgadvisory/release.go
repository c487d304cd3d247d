package main

import (
	"context"
	"fmt"

	"github.com/pgadvisory/pgadvisory/advisory/inspect"
)

var cmdRelease = &command{
	name:      "release",
	usageLine: "release --pid N --force [--dsn dsn]",
	short:     "end the session that holds a lock",
	long:      helpRelease,
	run:       runRelease,
}

// Statements of release. The PID is a parameter.
const (
	sqlBackendPID = `SELECT pg_catalog.pg_backend_pid()`
	sqlTerminate  = `SELECT pg_catalog.pg_terminate_backend($1)`
)

func runRelease(ctx context.Context, e *env, cmd *command, args []string) int {
	var (
		pid   int
		force bool
	)
	fs := newFlagSet(e, cmd)
	intFlag(fs, &pid, "p", "pid")
	boolFlag(fs, &force, "f", "force")
	dsn := dsnFlag(fs)
	if code := parseFlags(e, cmd, fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, cmd, "unexpected argument %q", fs.Arg(0))
	}
	if pid <= 0 {
		return usageError(e, cmd, "--pid N is required: the backend whose session to end")
	}
	db, err := openDB(ctx, e, *dsn, "pgadvisory release")
	if err != nil {
		return fail(e, cmd, exitUnavailable, "%v", err)
	}
	defer db.Close()

	dict, err := loadDictionary(ctx, db)
	if err != nil {
		return fail(e, cmd, exitUnavailable, "%v", err)
	}
	all, err := inspect.Locks(ctx, db.DB, inspect.WithRegistry(dict.registry), inspect.AllDatabases())
	if err != nil {
		return fail(e, cmd, exitUnavailable, "%v", db.redact.err(err))
	}
	var held []inspect.Lock
	for _, l := range all {
		if l.PID == pid {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		return fail(e, cmd, exitError, "pid %d holds and awaits no advisory lock; nothing ended", pid)
	}
	if !force {
		for _, l := range held {
			fmt.Fprintf(e.stderr, "\t%s\n", l)
		}
		return usageError(e, cmd, "not ending pid %d without --force: it would end the session and every lock above, advisory or not, and roll back its transaction", pid)
	}
	// Ending one's own session would only end this command.
	var self int
	if err := db.QueryRowContext(ctx, sqlBackendPID).Scan(&self); err == nil && self == pid {
		return fail(e, cmd, exitError, "pid %d is this command's own session", pid)
	}
	var ended bool
	if err := db.QueryRowContext(ctx, sqlTerminate, pid).Scan(&ended); err != nil {
		return fail(e, cmd, exitUnavailable, "ending pid %d: %v", pid, db.redact.err(err))
	}
	if !ended {
		return fail(e, cmd, exitError, "pid %d: the server did not end it (it may have ended already)", pid)
	}
	fmt.Fprintf(e.stdout, "ended pid %d with pg_terminate_backend; the server released what it held:\n", pid)
	for _, l := range held {
		fmt.Fprintf(e.stdout, "\t%s\n", l)
	}
	return exitOK
}
