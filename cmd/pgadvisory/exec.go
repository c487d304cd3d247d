package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

var cmdExec = &command{
	name:      "exec",
	usageLine: "exec [-n | -w d] [-s] [-E code] [--heartbeat d] [--grace d] [--dsn dsn] KEY [--] command [args...]",
	short:     "run a command while holding an advisory lock",
	long:      helpExec,
	run:       runExec,
}

// Defaults of exec's flags.
const (
	defaultHeartbeat = 5 * time.Second
	defaultGrace     = 10 * time.Second
	releaseTimeout   = 10 * time.Second
)

// execFlags are exec's flags.
type execFlags struct {
	nonblock, shared, noFencing bool
	waitSet                     bool // -w was given: wait at most wait
	wait, heartbeat, grace      durationValue
	conflictCode, lostCode      int
	dsn                         *string
}

func runExec(ctx context.Context, e *env, cmd *command, args []string) int {
	f := execFlags{
		heartbeat:    durationValue(defaultHeartbeat),
		grace:        durationValue(defaultGrace),
		conflictCode: exitConflict,
		lostCode:     exitLost,
	}
	fs := newFlagSet(e, cmd)
	boolFlag(fs, &f.nonblock, "n", "nonblock")
	boolFlag(fs, &f.shared, "s", "shared")
	durationFlag(fs, &f.wait, "w", "wait")
	intFlag(fs, &f.conflictCode, "E", "conflict-exit-code")
	intFlag(fs, &f.lostCode, "lost-exit-code")
	durationFlag(fs, &f.heartbeat, "heartbeat")
	durationFlag(fs, &f.grace, "grace")
	fs.BoolVar(&f.noFencing, "no-fencing", false, "")
	f.dsn = dsnFlag(fs)
	if code := parseFlags(e, cmd, fs, args); code >= 0 {
		return code
	}

	fs.Visit(func(fl *flag.Flag) { f.waitSet = f.waitSet || fl.Name == "w" || fl.Name == "wait" })
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError(e, cmd, "no KEY given")
	}
	argv := rest[1:]
	if i := slices.Index(argv, "--"); i > 0 {
		return usageError(e, cmd, "flags go before KEY; found %q after it", argv[0])
	} else if i == 0 {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return usageError(e, cmd, "no command given")
	}
	switch {
	case f.nonblock && f.wait > 0:
		return usageError(e, cmd, "-n and -w exclude each other")
	case f.conflictCode < 0 || f.conflictCode > 255:
		return usageError(e, cmd, "-E %d: an exit code is from 0 to 255", f.conflictCode)
	case f.lostCode < 0 || f.lostCode > 255:
		return usageError(e, cmd, "--lost-exit-code %d: an exit code is from 0 to 255", f.lostCode)
	case f.heartbeat < durationValue(time.Millisecond):
		return usageError(e, cmd, "--heartbeat %v: must be at least 1ms", f.heartbeat.String())
	}
	key, err := parseKeyArg(rest[0])
	if err == nil && key.bare {
		err = fmt.Errorf("%w: %q; write NAMESPACE:NAME or a number (run 'pgadvisory key %s' for the keys it maps to)", errBareName, key.text, key.text)
	}
	if err != nil {
		return usageError(e, cmd, "%v", err)
	}

	// Signals are caught from here on: while the lock is awaited they
	// end the wait, and once the command runs they go to it.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	lease, db, code := acquire(ctx, e, cmd, &f, key, sigs)
	if lease == nil {
		return code
	}
	defer db.Close()
	return supervise(e, cmd, &f, lease, db, argv, sigs)
}

// acquire connects and takes the lease on key. It returns the lease, or
// nil and the exit code.
func acquire(ctx context.Context, e *env, cmd *command, f *execFlags, key *keyArg, sigs <-chan os.Signal) (*advisory.Lease, *database, int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		lease *advisory.Lease
		db    *database
		code  int
	}
	done := make(chan result, 1)
	go func() {
		db, err := openDB(ctx, e, *f.dsn, "pgadvisory exec")
		if err != nil {
			done <- result{code: fail(e, cmd, exitUnavailable, "%v", err)}
			return
		}
		if err := key.resolve(ctx, db); err != nil {
			db.Close()
			done <- result{code: fail(e, cmd, exitUnavailable, "%v", db.redact.err(explainPooler(err)))}
			return
		}
		opts := []advisory.LeaseOption{advisory.Heartbeat(time.Duration(f.heartbeat))}
		if !f.noFencing {
			opts = append(opts, advisory.Fencing())
		}
		if f.nonblock {
			opts = append(opts, advisory.Try())
		}
		if f.waitSet {
			opts = append(opts, advisory.Wait(time.Duration(f.wait))) // -w 0 does not wait, as -n
		}
		if f.shared {
			opts = append(opts, advisory.Shared())
		}
		lease, err := advisory.Acquire(ctx, db.DB, key.key, opts...)
		var code int
		switch {
		case err == nil:
		case errors.Is(err, advisory.ErrNotAcquired):
			code = fail(e, cmd, f.conflictCode, "lock %s is held by another session", describeKey(key))
		case errors.Is(err, advisory.ErrLockTimeout):
			code = fail(e, cmd, f.conflictCode, "lock %s: gave up waiting after %v", describeKey(key), time.Duration(f.wait))
		case ctx.Err() != nil:
			code = exitUnavailable // interrupted; the caller says by what
		default:
			code = fail(e, cmd, exitUnavailable, "lock %s: %v", describeKey(key), db.redact.err(explainPooler(err)))
		}
		if err != nil {
			db.Close()
		}
		done <- result{lease, db, code}
	}()
	select {
	case r := <-done:
		return r.lease, r.db, r.code
	case s := <-sigs:
		// The wait ends when ctx does; the goroutine's db.Close then
		// waits, within a bound, until the server has ended the
		// session, so that no wait is left queued when the process
		// exits.
		cancel()
		r := <-done
		if r.lease != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), releaseTimeout)
			r.lease.Release(rctx)
			rcancel()
			r.db.Close()
		}
		fmt.Fprintf(e.stderr, "pgadvisory %s: interrupted by %v while waiting for lock %s\n", cmd.name, s, describeKey(key))
		return nil, nil, exitSignal + signalNumber(s)
	}
}

// supervise runs argv under lease, passes signals on to it, stops it when
// the lease is lost, and releases the lease when it ends. It returns the
// exit code.
func supervise(e *env, cmd *command, f *execFlags, lease *advisory.Lease, db *database, argv []string, sigs <-chan os.Signal) int {
	release := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		return lease.Release(ctx)
	}
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = e.stdin, e.stdout, e.stderr
	child.Env = append(e.environ(),
		"PGADVISORY_KEY="+lease.Key().String(),
		"PGADVISORY_TOKEN="+strconv.FormatInt(lease.Token(), 10))
	waited, err := startChild(child)
	if err != nil {
		release()
		code := exitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return fail(e, cmd, code, "%v", err)
	}

	for {
		select {
		case s := <-sigs:
			child.Process.Signal(s)
		case err := <-waited:
			code := exitCode(child, err)
			if rerr := release(); errors.Is(rerr, advisory.ErrLockLost) {
				return fail(e, cmd, f.lostCode, "lock %s was lost before the command finished (it exited with %d): %v", lease.Key(), code, db.redact.err(rerr))
			} else if rerr != nil {
				// The lock is gone either way: a release that fails
				// closes the session.
				fmt.Fprintf(e.stderr, "pgadvisory %s: releasing lock %s: %v\n", cmd.name, lease.Key(), db.redact.err(rerr))
			}
			return code
		case <-lease.Done():
			return lost(e, cmd, f, lease, db, child, waited, sigs)
		}
	}
}

// lost stops the command after the lease was lost: SIGTERM at once,
// SIGKILL after the grace period.
func lost(e *env, cmd *command, f *execFlags, lease *advisory.Lease, db *database, child *exec.Cmd, waited <-chan error, sigs <-chan os.Signal) int {
	cause := db.redact.err(lease.Err())
	fmt.Fprintf(e.stderr, "pgadvisory %s: lock %s lost while the command ran: %v; stopping the command (pid %d) with SIGTERM, then SIGKILL after %v\n",
		cmd.name, lease.Key(), cause, child.Process.Pid, time.Duration(f.grace))
	child.Process.Signal(sigterm)
	grace := time.NewTimer(time.Duration(f.grace))
	defer grace.Stop()
	for {
		select {
		case s := <-sigs:
			child.Process.Signal(s)
		case <-grace.C:
			fmt.Fprintf(e.stderr, "pgadvisory %s: the command did not stop within %v; killing it\n", cmd.name, time.Duration(f.grace))
			child.Process.Kill()
		case err := <-waited:
			lease.Release(context.Background())
			return fail(e, cmd, f.lostCode, "lock %s was lost: %v (command ended: %s)", lease.Key(), cause, describeExit(child, err))
		}
	}
}

// exitCode returns the code the shell would report for the command's end.
func exitCode(child *exec.Cmd, err error) int {
	if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return child.ProcessState.ExitCode()
}

// describeExit says how the command ended.
func describeExit(child *exec.Cmd, err error) string {
	if child.ProcessState == nil {
		return fmt.Sprint(err)
	}
	return child.ProcessState.String()
}

// describeKey returns the key as written and, when it differs, the key it
// stands for.
func describeKey(k *keyArg) string {
	if k.key.String() != k.text {
		return fmt.Sprintf("%s (%s)", k.text, k.key)
	}
	return k.text
}
