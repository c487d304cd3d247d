// Pgadvisory runs commands under PostgreSQL advisory locks and shows who
// holds them.
//
// Usage:
//
//	pgadvisory <command> [arguments]
//
// The commands are:
//
//	exec        run a command while holding an advisory lock
//	locks       list the advisory locks held and awaited
//	key         print the keys a name maps to, and the SQL that takes them
//	release     end the session that holds a lock
//	serve       serve lock metrics and a page of who holds and who waits
//	version     print pgadvisory's version
//
// Use "pgadvisory help <command>" for more information about a command,
// and "pgadvisory help connect" for how it finds the database. See
// docs/cli.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// env is what a command sees of the process, so that tests can run one
// in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	environ        func() []string
}

// A command is one of pgadvisory's subcommands.
type command struct {
	name      string
	usageLine string // after "usage: pgadvisory "
	short     string // one line for the command list
	long      string // the text of "pgadvisory help <name>"
	// keyHint, for a command that takes a KEY, is its command line with
	// a negative key (%s) after "--", for the message that says how to
	// write one.
	keyHint string
	run     func(ctx context.Context, e *env, cmd *command, args []string) int
}

// commands lists the subcommands in the order help shows them. It is filled
// in by init to break the cycle through help.
var commands []*command

// topics are help texts that are not commands.
var topics = map[string]string{
	"connect":    helpConnect,
	"keys":       helpKeys,
	"exit-codes": helpExitCodes,
}

func init() {
	commands = []*command{cmdExec, cmdLocks, cmdKey, cmdRelease, cmdServe, cmdVersion}
}

func main() {
	e := &env{
		stdin:   os.Stdin,
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		getenv:  os.Getenv,
		environ: os.Environ,
	}
	os.Exit(run(context.Background(), e, os.Args[1:]))
}

// run runs the command line args (without the program name) and returns
// the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		printMainUsage(e.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(e, args[1:])
	case "--version", "-version":
		return cmdVersion.run(ctx, e, cmdVersion, args[1:])
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(e.stderr, "pgadvisory %s: unknown command\nRun 'pgadvisory help' for usage.\n", name)
		return exitUsage
	}
	return cmd.run(ctx, e, cmd, args[1:])
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// runHelp prints the help for args, as "go help" does.
func runHelp(e *env, args []string) int {
	switch len(args) {
	case 0:
		printMainUsage(e.stdout)
		return exitOK
	case 1:
	default:
		fmt.Fprintf(e.stderr, "usage: pgadvisory help command\n\nToo many arguments given.\n")
		return exitUsage
	}
	if c := lookup(args[0]); c != nil {
		fmt.Fprintf(e.stdout, "usage: pgadvisory %s\n\n%s", c.usageLine, strings.TrimLeft(c.long, "\n"))
		return exitOK
	}
	if t, ok := topics[args[0]]; ok {
		fmt.Fprint(e.stdout, strings.TrimLeft(t, "\n"))
		return exitOK
	}
	fmt.Fprintf(e.stderr, "pgadvisory help %s: unknown help topic. Run 'pgadvisory help'.\n", args[0])
	return exitUsage
}

// printMainUsage prints the list of commands.
func printMainUsage(w io.Writer) {
	fmt.Fprint(w, "Pgadvisory runs commands under PostgreSQL advisory locks and shows who holds them.\n\n")
	fmt.Fprint(w, "Usage:\n\n\tpgadvisory <command> [arguments]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-11s %s\n", c.name, c.short)
	}
	fmt.Fprint(w, "\nUse \"pgadvisory help <command>\" for more information about a command.\n\n")
	fmt.Fprint(w, "Additional help topics:\n\n")
	fmt.Fprintf(w, "\t%-11s %s\n", "connect", "how pgadvisory finds the database")
	fmt.Fprintf(w, "\t%-11s %s\n", "keys", "how KEY arguments are written")
	fmt.Fprintf(w, "\t%-11s %s\n", "exit-codes", "what each exit code means")
	fmt.Fprint(w, "\nUse \"pgadvisory help <topic>\" for more information about that topic.\n")
}

// usageError reports a wrong command line, as the go command does, and
// returns exitUsage.
func usageError(e *env, cmd *command, format string, args ...any) int {
	if format != "" {
		fmt.Fprintf(e.stderr, "pgadvisory %s: %s\n", cmd.name, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(e.stderr, "usage: pgadvisory %s\nRun 'pgadvisory help %s' for details.\n", cmd.usageLine, cmd.name)
	return exitUsage
}

// fail reports an error of cmd and returns code.
func fail(e *env, cmd *command, code int, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "pgadvisory %s: %s\n", cmd.name, fmt.Sprintf(format, args...))
	return code
}
