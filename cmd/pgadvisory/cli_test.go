package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// runInProcess runs the command line in this process, with no database in
// its environment but what vars give.
func runInProcess(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{
		stdin:   strings.NewReader(""),
		stdout:  &out,
		stderr:  &errOut,
		getenv:  func(k string) string { return vars[k] },
		environ: func() []string { return nil },
	}
	code = run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

func TestParseKeyArg(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    advisory.Key
		bare    bool
		dict    bool // the namespace is a name
		wantErr string
	}{
		{in: "42", want: advisory.Int64Key(42)},
		{in: "-42", want: advisory.Int64Key(-42)},
		{in: "9223372036854775807", want: advisory.Int64Key(1<<63 - 1)},
		{in: "7:12", want: advisory.PairKey(7, 12)},
		{in: "7:-12", want: advisory.PairKey(7, -12)},
		{in: "-7:12", want: advisory.PairKey(-7, 12)},
		{in: "7:nightly", want: advisory.NameKey(7, "nightly")},
		{in: "7:a:b", want: advisory.NameKey(7, "a:b")},
		{in: `7:"12x"`, want: advisory.NameKey(7, "12x")},
		{in: `1:"1234"`, want: advisory.NameKey(1, "1234")},
		{in: `7:""`, want: advisory.NameKey(7, "")},
		{in: "billing:nightly", dict: true},
		{in: "billing:12", dict: true},
		{in: `billing:"2024"`, dict: true},
		{in: "nightly", bare: true},
		{in: `"2024:x"`, bare: true},
		{in: `"x`, wantErr: "double-quoted"},
		{in: "", wantErr: "empty key"},
		{in: "9223372036854775808", wantErr: `key "9223372036854775808": "9223372036854775808" is out of the range of an int64 (bigint)`},
		{in: "2147483648:1", wantErr: "out of the range of an int32 (int4)"},
		{in: "1:2147483648", wantErr: "out of the range of an int32 (int4)"},
		{in: "+42", wantErr: "write 42"},
		{in: "007:x", wantErr: "write 7"},
		{in: "7:12x", wantErr: `a name that begins with a digit or a sign is quoted, as in 7:"2024-report"`},
		{in: "1:2:3", wantErr: `"2:3" is not a decimal integer`},
		{in: ":x", wantErr: "empty namespace"},
		{in: "7:", wantErr: "empty name"},
		{in: "7: x", wantErr: `is quoted: " x"`},
		{in: "7:a\x00b", wantErr: "NUL"},
		{in: "a\x00b", wantErr: "NUL"},
		{in: "billing:", wantErr: `key "billing:": empty name after the colon`},
		{in: "billing:007", wantErr: `key "billing:007": after the colon, "007" is not written canonically`},
	}
	for _, c := range cases {
		k, err := parseKeyArg(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("parseKeyArg(%q): error %v, want one saying %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseKeyArg(%q): %v", c.in, err)
			continue
		}
		if k.bare != c.bare || k.needsDictionary() != c.dict {
			t.Errorf("parseKeyArg(%q): bare %v, dictionary %v; want %v, %v", c.in, k.bare, k.needsDictionary(), c.bare, c.dict)
		}
		if !c.bare && !c.dict && k.key != c.want {
			t.Errorf("parseKeyArg(%q) = %v, want %v", c.in, k.key, c.want)
		}
		if lib, err := advisory.ParseKey(c.in); !c.bare && !c.dict && (err != nil || lib != k.key) {
			t.Errorf("parseKeyArg(%q) = %v; advisory.ParseKey gives %v, %v: want the same key", c.in, k.key, lib, err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := []struct{ dsn, secret string }{
		{"postgres://app:s3cr%40t@db:5432/app", "s3cr@t"},
		{"postgresql://app:hunter2@db/app?sslmode=disable", "hunter2"},
		{"host=db user=app password=hunter2 dbname=app", "hunter2"},
		{"host=db password = 'two words' user=app", "two words"},
	}
	for _, c := range cases {
		r := newRedactor(c.dsn)
		msg := r.String("cannot use " + c.dsn + ": bad password " + c.secret)
		if strings.Contains(msg, c.secret) || strings.Contains(msg, "hunter2") {
			t.Errorf("redacted %q still shows the password: %s", c.dsn, msg)
		}
		if err := r.err(errors.New(c.dsn)); strings.Contains(err.Error(), c.secret) {
			t.Errorf("redacted error shows the password: %v", err)
		}
	}
	if got := newRedactor("", "fromenv").String("password fromenv"); strings.Contains(got, "fromenv") {
		t.Errorf("PGPASSWORD not redacted: %s", got)
	}
}

// TestConnectErrorHidesPassword fails to connect, with a password in the
// DSN and in PGPASSWORD, and checks that neither is printed.
func TestConnectErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://app:s3cret-url@127.0.0.1:1/app?connect_timeout=5",
		"host=127.0.0.1 port=1 user=app password=s3cret-kv connect_timeout=5",
		"postgres://app:s3cret-broken@127.0.0.1:notaport/app",
	} {
		for _, args := range [][]string{
			{"exec", "--dsn", dsn, "1", "--", "true"},
			{"locks", "--dsn", dsn},
			{"release", "--dsn", dsn, "--pid", "1", "--force"},
			{"key", "--dsn", dsn, "ns:name"},
		} {
			code, stdout, stderr := runInProcess(t, map[string]string{"PGPASSWORD": "s3cret-env"}, args...)
			if code == 0 {
				t.Errorf("%v: exit 0 with no server", args[0])
			}
			if strings.Contains(stdout+stderr, "s3cret") {
				t.Errorf("%v: a password was printed:\n%s%s", args[0], stdout, stderr)
			}
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: nil, code: 64, stderr: "Usage:\n\n\tpgadvisory <command> [arguments]"},
		{args: []string{"help"}, code: 0, stdout: "The commands are:"},
		{args: []string{"help", "exec"}, code: 0, stdout: "usage: pgadvisory exec [-n | -w d]"},
		{args: []string{"help", "locks"}, code: 0, stdout: "usage: pgadvisory locks"},
		{args: []string{"help", "connect"}, code: 0, stdout: "DATABASE_URL"},
		{args: []string{"help", "nosuch"}, code: 64, stderr: "unknown help topic"},
		{args: []string{"exec", "-h"}, code: 0, stdout: "Exit codes ("},
		{args: []string{"nosuch"}, code: 64, stderr: "pgadvisory nosuch: unknown command\nRun 'pgadvisory help' for usage."},
		{args: []string{"exec"}, code: 64, stderr: "pgadvisory exec: no KEY given\nusage: pgadvisory exec"},
		{args: []string{"exec", "--bogus", "1", "--", "true"}, code: 64, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"exec", "-n", "-w", "1s", "1", "--", "true"}, code: 64, stderr: "-n and -w exclude each other"},
		{args: []string{"exec", "-w", "soon", "1", "--", "true"}, code: 64, stderr: "neither a duration"},
		{args: []string{"exec", "-E", "300", "1", "--", "true"}, code: 64, stderr: "from 0 to 255"},
		{args: []string{"exec", "1"}, code: 64, stderr: "no command given"},
		{args: []string{"locks", "extra"}, code: 64, stderr: "unexpected argument"},
		{args: []string{"key"}, code: 64, stderr: "no NAME given"},
		{args: []string{"release"}, code: 64, stderr: "--pid N is required"},
	}
	for _, c := range cases {
		code, stdout, stderr := runInProcess(t, nil, c.args...)
		if code != c.code || !strings.Contains(stdout, c.stdout) || !strings.Contains(stderr, c.stderr) {
			t.Errorf("pgadvisory %q: exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout %q, stderr %q", c.args, code, c.code, stdout, stderr, c.stdout, c.stderr)
		}
	}
}

func TestKeyCommand(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runInProcess(t, nil, "key", "7:nightly", "it's", "42", "--", "-5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"key     " + advisory.NameKey(7, "nightly").String() + "  (namespace 7, hashtext('nightly')",
		"lock    SELECT pg_advisory_lock(7, hashtext('nightly'));",
		"go      advisory.NameKey(7, \"nightly\")",
		"SELECT pg_advisory_lock(hashtext('it''s'));",
		"SELECT pg_advisory_lock(hashtextextended('it''s', 0));",
		"key     " + advisory.Int64Key(advisory.HashTextExtended("it's", 0)).String(),
		"xact    SELECT pg_advisory_xact_lock(42);",
		"exec    pgadvisory exec -- -5 -- command",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}
