package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
)

var cmdKey = &command{
	name:      "key",
	usageLine: "key [--dsn dsn] NAME|KEY...",
	short:     "print the keys a name maps to, and the SQL that takes them",
	long:      helpKey,
	keyHint:   "pgadvisory key -- %s",
	run:       runKey,
}

func runKey(ctx context.Context, e *env, cmd *command, args []string) int {
	fs := newFlagSet(e, cmd)
	dsn := dsnFlag(fs)
	if code := parseFlags(e, cmd, fs, args); code >= 0 {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(e, cmd, "no NAME given")
	}
	var keys []*keyArg
	var db *database
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	for _, s := range fs.Args() {
		if s == "--" {
			continue
		}
		k, err := parseKeyArg(s)
		if err != nil {
			return usageError(e, cmd, "%v", err)
		}
		if k.needsDictionary() {
			// Only a namespace written as a name needs the database.
			if db == nil {
				if db, err = openDB(ctx, e, *dsn, "pgadvisory key"); err != nil {
					return fail(e, cmd, exitUnavailable, "%v", k.explainUnreachable(err))
				}
			}
			if err := k.resolve(ctx, db); err != nil {
				return fail(e, cmd, resolveCode(err), "%v", err)
			}
		}
		keys = append(keys, k)
	}
	for i, k := range keys {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		writeKey(e.stdout, k)
	}
	fmt.Fprint(e.stdout, "\npsql holds a session lock until it exits: take it, do the work and unlock in\none psql run, or run the work under pgadvisory exec.\n")
	return exitOK
}

// resolveCode returns the exit code for an error of keyArg.resolve: 64
// when the database answered that the namespace has no number (the KEY
// names nothing), 69 when it could not answer.
func resolveCode(err error) int {
	if errors.Is(err, errNoNamespace) {
		return exitUsage
	}
	return exitUnavailable
}

// writeKey prints what k maps to.
func writeKey(w io.Writer, k *keyArg) {
	fmt.Fprintf(w, "%s\n", k.text)
	switch {
	case k.bare:
		h := advisory.HashText(k.name)
		writeForm(w, advisory.Int64Key(int64(h)),
			fmt.Sprintf("hashtext(%s), a bigint key", quoteLiteral(k.name)),
			fmt.Sprintf("advisory.Int64Key(int64(advisory.HashText(%s)))", strconv.Quote(k.name)),
			fmt.Sprintf("hashtext(%s)", quoteLiteral(k.name)))
		fmt.Fprintln(w)
		writeForm(w, advisory.Int64Key(advisory.HashTextExtended(k.name, 0)),
			fmt.Sprintf("hashtextextended(%s, 0), a bigint key", quoteLiteral(k.name)),
			fmt.Sprintf("advisory.Int64Key(advisory.HashTextExtended(%s, 0))", strconv.Quote(k.name)),
			fmt.Sprintf("hashtextextended(%s, 0)", quoteLiteral(k.name)))
		fmt.Fprintf(w, "\n  A name alone is two keys, one per hash; a namespace makes it a pair key:\n  pgadvisory key %s\n", withNamespace(k.name))
	case k.isName:
		_, h, _ := k.key.Pair()
		about := fmt.Sprintf("namespace %d, hashtext(%s) = %d", k.ns, quoteLiteral(k.name), h)
		if k.nsName != "" {
			about = fmt.Sprintf("namespace %d (%s), hashtext(%s) = %d", k.ns, k.nsName, quoteLiteral(k.name), h)
		}
		writeForm(w, k.key, about,
			fmt.Sprintf("advisory.NameKey(%d, %s)", k.ns, strconv.Quote(k.name)),
			fmt.Sprintf("%d, hashtext(%s)", k.ns, quoteLiteral(k.name)))
	default:
		if v, ok := k.key.Int64(); ok {
			writeForm(w, k.key, "a bigint key", fmt.Sprintf("advisory.Int64Key(%d)", v), strconv.FormatInt(v, 10))
		} else {
			a, b, _ := k.key.Pair()
			about := "a pair key"
			if k.nsName != "" {
				about = fmt.Sprintf("a pair key, namespace %d (%s)", a, k.nsName)
			}
			writeForm(w, k.key, about, fmt.Sprintf("advisory.PairKey(%d, %d)", a, b), fmt.Sprintf("%d, %d", a, b))
		}
	}
}

// withNamespace returns the KEY argument that puts name in a namespace,
// quoted as advisory.ParseKey needs it and, then, for the shell.
func withNamespace(name string) string {
	if k, err := advisory.ParseKey("0:" + name); err == nil && k == advisory.NameKey(0, name) {
		return "NAMESPACE:" + name
	}
	return "'NAMESPACE:" + strings.ReplaceAll(strconv.Quote(name), "'", `'\''`) + "'"
}

// writeForm prints one key: its canonical form, the Go that builds it, the
// SQL that takes and releases it, and the exec command line.
func writeForm(w io.Writer, key advisory.Key, about, goExpr, sqlArgs string) {
	exec := "pgadvisory exec " + key.String() + " -- command"
	if strings.HasPrefix(key.String(), "-") {
		// A leading '-' would read as a flag.
		exec = "pgadvisory exec -- " + key.String() + " -- command"
	}
	fmt.Fprintf(w, "  key     %s  (%s)\n", key, about)
	fmt.Fprintf(w, "  exec    %s\n", exec)
	fmt.Fprintf(w, "  go      %s\n", goExpr)
	fmt.Fprintf(w, "  lock    SELECT pg_advisory_lock(%s);\n", sqlArgs)
	fmt.Fprintf(w, "  unlock  SELECT pg_advisory_unlock(%s);\n", sqlArgs)
	fmt.Fprintf(w, "  xact    SELECT pg_advisory_xact_lock(%s);  -- until COMMIT or ROLLBACK\n", sqlArgs)
}

// quoteLiteral quotes s as an SQL string literal, for
// standard_conforming_strings = on, the default.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
