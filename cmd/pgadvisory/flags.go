package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
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
	args, err := expandFlags(fs, args)
	if err == nil {
		err = fs.Parse(args)
	}
	var neg *errNegative
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		return runHelp(e, []string{cmd.name})
	case errors.As(err, &neg) && cmd.keyHint != "":
		return usageError(e, cmd, "key %s reads as a flag; put a negative key after \"--\": %s", neg.arg, fmt.Sprintf(cmd.keyHint, neg.arg))
	case errors.As(err, &neg):
		return usageError(e, cmd, "flag provided but not defined: %s", neg.arg)
	default:
		return usageError(e, cmd, "%v", err)
	}
}

// errNegative means a negative number stood where a flag may be: a KEY
// such as -42 or -7:12, which reads as a flag before "--".
type errNegative struct{ arg string }

func (e *errNegative) Error() string {
	return fmt.Sprintf("%s reads as a flag; a negative KEY goes after \"--\"", e.arg)
}

// expandFlags rewrites args as package flag reads them, so that short
// flags combine as getopt(3) lets them: -ns is -n -s, and in -sw30s or
// -sw 30s, the flag that takes a value, w, ends the group and takes the
// rest of it, or the next argument, as its value. A group is read so only
// when it is not a flag's name itself (-nonblock is --nonblock) and every
// letter in it is a one-letter flag; anything else is left for fs.Parse to
// report. It stops where fs.Parse stops: at "--" or the first argument that
// is not a flag. A negative number there is an error that says to put it
// after "--".
func expandFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || len(arg) < 2 || arg[0] != '-' {
			return append(out, args[i:]...), nil
		}
		name := strings.TrimLeft(arg, "-")
		if n, _, hasValue := strings.Cut(name, "="); fs.Lookup(n) != nil {
			out = append(out, arg)
			if !hasValue && !isBool(fs.Lookup(n)) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		if arg[1] >= '0' && arg[1] <= '9' {
			return nil, &errNegative{arg}
		}
		group, ok := splitGroup(fs, arg)
		if !ok {
			out = append(out, arg) // fs.Parse reports it
			continue
		}
		out = append(out, group...)
		if last := fs.Lookup(strings.TrimPrefix(group[len(group)-1], "-")); last != nil && !isBool(last) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out, nil
}

// splitGroup splits a group of one-letter flags such as -ns or -sw30s
// into -n -s, or -s -w=30s. It reports false unless arg is such a group.
func splitGroup(fs *flag.FlagSet, arg string) ([]string, bool) {
	if strings.HasPrefix(arg, "--") || strings.ContainsRune(arg, '=') {
		return nil, false
	}
	var group []string
	for j := 1; j < len(arg); j++ {
		f := fs.Lookup(arg[j : j+1])
		if f == nil {
			return nil, false
		}
		if !isBool(f) {
			if rest := arg[j+1:]; rest != "" {
				return append(group, "-"+f.Name+"="+rest), true
			}
			return append(group, "-"+f.Name), true
		}
		group = append(group, "-"+f.Name)
	}
	return group, true
}

// isBool reports whether f takes no value.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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

// boolFlag defines a flag under a short and a long name.
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
