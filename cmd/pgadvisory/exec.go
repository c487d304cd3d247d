package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/semaphore"
)

var cmdExec = &command{
	name:      "exec",
	usageLine: "exec [-n | -w d] [-s | --limit N] [-E code] [--heartbeat d] [--grace d] [--dsn dsn] KEY [--] command [args...]",
	short:     "run a command while holding an advisory lock",
	long:      helpExec,
	keyHint:   "pgadvisory exec [flags] -- %s command",
	run:       runExec,
}

// maxLimit is the most slots --limit takes, as package semaphore allows.
const maxLimit = 65536

// Defaults of exec's flags.
const (
	defaultHeartbeat = 5 * time.Second
	defaultGrace     = 10 * time.Second
	releaseTimeout   = 10 * time.Second
)

// execFlags are exec's flags.
type execFlags struct {
	nonblock, shared, noFencing, noPGEnv bool
	waitSet                              bool // -w was given: wait at most wait
	wait, heartbeat, grace               durationValue
	conflictCode, lostCode               int
	limit                                int // --limit: the semaphore's slots; 0 without
	dsn                                  *string
}

// tries reports whether the flags ask not to wait: -n, or -w 0, which
// means the same, as advisory.Wait(0) does.
func (f *execFlags) tries() bool { return f.nonblock || f.waitSet && f.wait == 0 }

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
	fs.BoolVar(&f.noPGEnv, "no-pg-env", false, "")
	intFlag(fs, &f.limit, "limit")
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
	case f.limit < 0 || f.limit > maxLimit:
		return usageError(e, cmd, "--limit %d: the number of slots is from 1 to %d", f.limit, maxLimit)
	case f.limit > 0 && f.shared:
		return usageError(e, cmd, "--limit and -s exclude each other: a slot is an exclusive lock")
	}
	key, err := parseKeyArg(rest[0])
	if err == nil && key.bare {
		err = fmt.Errorf("%w: %q; write NAMESPACE:NAME or a number (run 'pgadvisory key %s' for the keys it maps to)", errBareName, key.text, key.text)
	}
	if err == nil && f.limit > 0 && !key.needsDictionary() {
		err = checkSlots(key.key, f.limit)
	}
	if err != nil {
		return usageError(e, cmd, "%v", err)
	}

	// Signals are caught from here on: while the lock is awaited they
	// end the wait, and once the command runs they go to it.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	h, code := acquire(ctx, e, cmd, &f, key, sigs)
	if h == nil {
		return code
	}
	defer h.db.Close()
	childEnv, err := commandEnv(e, &f, key, h)
	if err != nil {
		// pgx read the DSN, so this cannot happen; the lock goes.
		h.lease.Release(context.Background())
		return fail(e, cmd, exitUnavailable, "%v", h.db.redact.err(err))
	}
	return supervise(e, cmd, &f, h.lease, h.db, argv, childEnv, sigs)
}

// checkSlots reports an error when a semaphore of n slots from base
// would pass the largest bigint; a pair key's slots wrap around within
// the int32 after the colon, as package semaphore lays them out.
func checkSlots(base advisory.Key, n int) error {
	if v, ok := base.Int64(); ok && v > math.MaxInt64-int64(n-1) {
		return fmt.Errorf("--limit %d: the slots from %d would pass the largest bigint", n, v)
	}
	return nil
}

// A holding is what exec runs the command under: a lease, and with --limit,
// which slot it holds.
type holding struct {
	lease *advisory.Lease
	db    *database
	slot  int // with --limit, the slot's number from 0
}

// acquire connects and takes the lease on key (with --limit, a slot of
// the semaphore from key). It returns the hold, or nil and the exit code.
func acquire(ctx context.Context, e *env, cmd *command, f *execFlags, key *keyArg, sigs <-chan os.Signal) (*holding, int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		h    *holding
		code int
	}
	done := make(chan result, 1)
	go func() {
		db, err := openDB(ctx, e, *f.dsn, "pgadvisory exec")
		if err != nil {
			if key.needsDictionary() {
				err = key.explainUnreachable(err)
			}
			done <- result{code: fail(e, cmd, exitUnavailable, "%v", err)}
			return
		}
		if err := key.resolve(ctx, db); err != nil {
			db.Close()
			done <- result{code: fail(e, cmd, resolveCode(err), "%v", db.redact.err(explainPooler(err)))}
			return
		}
		if f.limit > 0 {
			if err := checkSlots(key.key, f.limit); err != nil {
				db.Close()
				done <- result{code: fail(e, cmd, exitUsage, "%v", err)}
				return
			}
		}
		h, err := take(ctx, db, f, key)
		var code int
		switch {
		case err == nil:
		case errors.Is(err, advisory.ErrNotAcquired), errors.Is(err, advisory.ErrLockTimeout),
			errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			code = fail(e, cmd, f.conflictCode, "%s", conflictMessage(ctx, db, f, key))
		case ctx.Err() != nil:
			code = exitUnavailable // interrupted; the caller says by what
		default:
			code = fail(e, cmd, exitUnavailable, "lock %s: %v", describeKey(key), db.redact.err(explainPooler(err)))
		}
		if err != nil {
			db.Close()
		}
		done <- result{h, code}
	}()
	select {
	case r := <-done:
		return r.h, r.code
	case s := <-sigs:
		// The wait ends when ctx does; the goroutine's db.Close then
		// waits, within a bound, until the server has ended the
		// session, so that no wait is left queued when the process
		// exits.
		cancel()
		r := <-done
		if r.h != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), releaseTimeout)
			r.h.lease.Release(rctx)
			rcancel()
			r.h.db.Close()
		}
		fmt.Fprintf(e.stderr, "pgadvisory %s: interrupted by %s while waiting for %s\n", cmd.name, signalName(s), describeWait(f, key))
		return nil, exitSignal + signalNumber(s)
	}
}

// take takes the lease on key, or with --limit a slot of the semaphore
// from key, as the flags say.
func take(ctx context.Context, db *database, f *execFlags, key *keyArg) (*holding, error) {
	if f.limit > 0 {
		opts := []semaphore.Option{semaphore.Heartbeat(time.Duration(f.heartbeat))}
		if !f.noFencing {
			opts = append(opts, semaphore.Fencing())
		}
		sem := semaphore.New(db.DB, key.key, f.limit, opts...)
		var lease *advisory.Lease
		var err error
		switch {
		case f.tries():
			lease, err = sem.TryAcquire(ctx)
		case f.waitSet:
			wctx, cancel := context.WithTimeout(ctx, time.Duration(f.wait))
			lease, err = sem.Acquire(wctx)
			cancel()
		default:
			lease, err = sem.Acquire(ctx)
		}
		if err != nil {
			return nil, err
		}
		h := &holding{lease: lease, db: db}
		for i := range f.limit {
			if sem.Slot(i) == lease.Key() {
				h.slot = i
				break
			}
		}
		return h, nil
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
	if err != nil {
		return nil, err
	}
	return &holding{lease: lease, db: db}, nil
}

// conflictMessage says that the lock is taken (with -n, -w 0) or that
// the wait ran out (-w), and who holds it, from one query of pg_locks.
func conflictMessage(ctx context.Context, db *database, f *execFlags, key *keyArg) string {
	keys := []advisory.Key{key.key}
	if f.limit > 0 {
		sem := semaphore.New(db.DB, key.key, f.limit)
		keys = keys[:0]
		for i := range f.limit {
			keys = append(keys, sem.Slot(i))
		}
	}
	var by string
	if hs, qerr := holders(ctx, db.DB, keys, f.shared); qerr == nil {
		by = describeHolders(hs)
	}
	what := "lock " + describeKey(key)
	if f.limit > 0 {
		what = fmt.Sprintf("every one of the %d slots from %s", f.limit, describeKey(key))
	}
	switch {
	case f.tries() && by != "":
		return fmt.Sprintf("%s is held by %s", what, by)
	case f.tries():
		return fmt.Sprintf("%s is held by another session", what)
	case by != "":
		return fmt.Sprintf("%s: gave up waiting after %v; held by %s", what, time.Duration(f.wait), by)
	}
	return fmt.Sprintf("%s: gave up waiting after %v", what, time.Duration(f.wait))
}

// describeWait names what exec waits for, for a message.
func describeWait(f *execFlags, key *keyArg) string {
	if f.limit > 0 {
		return fmt.Sprintf("one of the %d slots from %s", f.limit, describeKey(key))
	}
	return "lock " + describeKey(key)
}

// supervise runs argv under lease, passes signals on to it, stops it when
// the lease is lost, and releases the lease when it ends. It returns the
// exit code.
func supervise(e *env, cmd *command, f *execFlags, lease *advisory.Lease, db *database, argv, childEnv []string, sigs <-chan os.Signal) int {
	release := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		return lease.Release(ctx)
	}
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = e.stdin, e.stdout, e.stderr
	child.Env = childEnv
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
