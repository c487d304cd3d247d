package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// newFlagSet returns cmd's flag set. Its errors go to e.stderr, and -h
// prints the command's help.
func newFlagSet(e *env, cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs. It returns -1 when the command should go
// on, or the exit code: 0 after -h, which prints the help, and exitUsage
// after a wrong flag, which it reports.
func parseFlags(e *env, cmd *command, fs *flag.FlagSet, args []string) int {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		return runHelp(e, []string{cmd.name})
	default:
		return usageError(e, cmd, "%v", err)
	}
}

// dsnFlag adds --dsn to fs.
func dsnFlag(fs *flag.FlagSet) *string {
	return fs.String("dsn", "", "")
}

// durationValue is a flag that takes a Go duration ("1m30s", "250ms")
// or, as flock(1) does, a number of seconds ("5", "0.5").
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || math.IsNaN(f) || f > math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("%s: out of range", s)
		}
		*d = durationValue(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is neither a duration such as 30s nor a number of seconds", s)
	}
	if v < 0 {
		return fmt.Errorf("%s: must not be negative", s)
	}
	*d = durationValue(v)
	return nil
}

// both defines a flag under a short and a long name.
func boolFlag(fs *flag.FlagSet, p *bool, short, long string) {
	fs.BoolVar(p, short, *p, "")
	fs.BoolVar(p, long, *p, "")
}

func durationFlag(fs *flag.FlagSet, p *durationValue, names ...string) {
	for _, n := range names {
		fs.Var(p, n, "")
	}
}

func intFlag(fs *flag.FlagSet, p *int, names ...string) {
	for _, n := range names {
		fs.IntVar(p, n, *p, "")
	}
}
