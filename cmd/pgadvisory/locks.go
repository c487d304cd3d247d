package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory/inspect"
)

var cmdLocks = &command{
	name:      "locks",
	usageLine: "locks [--json] [--watch interval] [--all-databases] [--dsn dsn]",
	short:     "list the advisory locks held and awaited",
	long:      helpLocks,
	run:       runLocks,
}

func runLocks(ctx context.Context, e *env, cmd *command, args []string) int {
	var (
		asJSON, all bool
		watch       durationValue
	)
	fs := newFlagSet(e, cmd)
	boolFlag(fs, &asJSON, "j", "json")
	boolFlag(fs, &all, "a", "all-databases")
	durationFlag(fs, &watch, "watch")
	dsn := dsnFlag(fs)
	if code := parseFlags(e, cmd, fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, cmd, "unexpected argument %q", fs.Arg(0))
	}
	if watch > 0 && watch < durationValue(100*time.Millisecond) {
		return usageError(e, cmd, "--watch %v: the interval must be at least 100ms", watch.String())
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, sigterm)
	defer stop()

	db, err := openDB(ctx, e, *dsn, "pgadvisory locks")
	if err != nil {
		return fail(e, cmd, exitUnavailable, "%v", err)
	}
	defer db.Close()

	var w *watcher
	if watch > 0 {
		w = &watcher{terminal: isTerminal(e.stdout)}
	}
	for {
		if err := showLocks(ctx, e, db, asJSON, all, w); err != nil {
			if watch > 0 && ctx.Err() != nil {
				return exitOK
			}
			return fail(e, cmd, exitUnavailable, "%v", err)
		}
		if watch == 0 {
			return exitOK
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(time.Duration(watch)):
		}
	}
}

// A watcher is the state of locks --watch between refreshes.
type watcher struct {
	terminal bool // stdout is a terminal: clear it before each refresh
	shown    int  // refreshes printed so far
}

// header starts a refresh of the table. On a terminal it clears the
// screen and says when, as watch(1) does. Elsewhere, in a file or a pipe,
// it writes no control codes: each refresh is a block that begins with
// its time, and a blank line separates it from the previous one.
func (w *watcher) header(out io.Writer, now time.Time) {
	switch {
	case w.terminal:
		fmt.Fprintf(out, "\033[H\033[2J%s\n\n", now.Format(time.DateTime))
	case w.shown > 0:
		fmt.Fprintf(out, "\n%s\n\n", now.Format(time.DateTime))
	default:
		fmt.Fprintf(out, "%s\n\n", now.Format(time.DateTime))
	}
	w.shown++
}

// showLocks reads the locks once and prints them; w is nil unless the
// command runs with --watch.
func showLocks(ctx context.Context, e *env, db *database, asJSON, all bool, w *watcher) error {
	dict, err := loadDictionary(ctx, db)
	if err != nil {
		return err
	}
	opts := []inspect.Option{inspect.WithRegistry(dict.registry)}
	if all {
		opts = append(opts, inspect.AllDatabases())
	}
	locks, err := inspect.Locks(ctx, db.DB, opts...)
	if err != nil {
		return db.redact.err(err)
	}
	now := time.Now()
	if asJSON {
		return writeLocksJSON(e.stdout, locks, now, w != nil)
	}
	if w != nil {
		w.header(e.stdout, now)
	}
	writeLocksTable(e.stdout, locks, now, all)
	return nil
}

// writeLocksTable prints locks as a table, then who blocks whom.
func writeLocksTable(w io.Writer, locks []inspect.Lock, now time.Time, all bool) {
	if len(locks) == 0 {
		fmt.Fprintln(w, "no advisory locks held or awaited")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := "KEY\tNAMESPACE\tMODE\tSTATE\tPID\tAPPLICATION\tUSER\tSESSION\tAGE\tBLOCKED BY"
	if all {
		head += "\tDATABASE"
	}
	fmt.Fprintln(tw, head)
	for _, l := range locks {
		state := "held"
		if !l.Granted {
			state = "waiting"
		}
		row := []string{
			l.Key.String(), dash(l.Namespace), l.Mode(), state, strconv.Itoa(l.PID),
			dash(l.ApplicationName), dash(l.User), dash(l.State), dash(age(l, now)), dash(pids(l.BlockedBy)),
		}
		if all {
			row = append(row, dash(l.Database))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	if g := inspect.WaitGraph(locks); g != "" {
		fmt.Fprintf(w, "\nWho blocks whom:\n\n%s", g)
		if !strings.HasSuffix(g, "\n") {
			fmt.Fprintln(w)
		}
	}
}

// age returns how long a waiter has waited, or how long a holder's session
// has been in its current state: pg_locks does not record when a lock was
// granted.
func age(l inspect.Lock, now time.Time) string {
	var d time.Duration
	switch {
	case !l.Granted && l.Waited > 0:
		d = l.Waited
	case !l.StateChange.IsZero():
		d = now.Sub(l.StateChange)
	default:
		return ""
	}
	if d < 0 {
		d = 0
	}
	return roundDuration(d).String()
}

// roundDuration rounds d for a person to read.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pids(p []int) string {
	s := make([]string, len(p))
	for i, pid := range p {
		s[i] = strconv.Itoa(pid)
	}
	return strings.Join(s, ",")
}

// jsonLock is one lock in the output of --json.
type jsonLock struct {
	Key             string     `json:"key"`
	Bigint          *int64     `json:"bigint,omitempty"`
	Pair            []int32    `json:"pair,omitempty"`
	Namespace       string     `json:"namespace,omitempty"`
	Mode            string     `json:"mode"`
	Granted         bool       `json:"granted"`
	PID             int        `json:"pid"`
	Database        string     `json:"database"`
	ApplicationName string     `json:"application_name"`
	User            string     `json:"user"`
	ClientAddr      string     `json:"client_addr,omitempty"`
	State           string     `json:"state"`
	Query           string     `json:"query"`
	XactStart       *time.Time `json:"xact_start,omitempty"`
	StateChange     *time.Time `json:"state_change,omitempty"`
	WaitStart       *time.Time `json:"wait_start,omitempty"`
	WaitedSeconds   float64    `json:"waited_seconds"`
	BlockedBy       []int      `json:"blocked_by"`
}

// writeLocksJSON prints locks as a JSON array: indented, or on one line
// per refresh under --watch.
func writeLocksJSON(w io.Writer, locks []inspect.Lock, now time.Time, watching bool) error {
	out := make([]jsonLock, 0, len(locks))
	for _, l := range locks {
		j := jsonLock{
			Key:             l.Key.String(),
			Namespace:       l.Namespace,
			Mode:            l.Mode(),
			Granted:         l.Granted,
			PID:             l.PID,
			Database:        l.Database,
			ApplicationName: l.ApplicationName,
			User:            l.User,
			ClientAddr:      l.ClientAddr,
			State:           l.State,
			Query:           l.Query,
			XactStart:       timePtr(l.XactStart),
			StateChange:     timePtr(l.StateChange),
			WaitStart:       timePtr(l.WaitStart),
			WaitedSeconds:   seconds(l.Waited),
			BlockedBy:       l.BlockedBy,
		}
		if j.BlockedBy == nil {
			j.BlockedBy = []int{}
		}
		if v, ok := l.Key.Int64(); ok {
			j.Bigint = &v
		} else if a, b, ok := l.Key.Pair(); ok {
			j.Pair = []int32{a, b}
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(w)
	if !watching {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(out)
}

// seconds returns d in seconds, rounded to the millisecond: 1.537, not
// 1.5366870000000001.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
