package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestExpandFlags(t *testing.T) {
	t.Parallel()
	newFS := func() *flag.FlagSet {
		var n, s, j bool
		var w durationValue
		var code int
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		boolFlag(fs, &n, "n", "nonblock")
		boolFlag(fs, &s, "s", "shared")
		boolFlag(fs, &j, "j", "json")
		durationFlag(fs, &w, "w", "wait")
		intFlag(fs, &code, "E", "conflict-exit-code")
		return fs
	}
	cases := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
		// parseFails: flag.Parse rejects the result, and says why
		parseFails bool
	}{
		{name: "Plain", in: []string{"-n", "-s", "42", "cmd"}, want: []string{"-n", "-s", "42", "cmd"}},
		{name: "Group", in: []string{"-ns", "42"}, want: []string{"-n", "-s", "42"}},
		{name: "GroupOfThree", in: []string{"-nsj"}, want: []string{"-n", "-s", "-j"}},
		{name: "GroupEndsInValueFlag", in: []string{"-sw", "30s", "42"}, want: []string{"-s", "-w", "30s", "42"}},
		{name: "GroupWithValue", in: []string{"-sw30s", "42"}, want: []string{"-s", "-w=30s", "42"}},
		{name: "AttachedValue", in: []string{"-E0", "42"}, want: []string{"-E=0", "42"}},
		{name: "LongNameOneDash", in: []string{"-nonblock", "42"}, want: []string{"-nonblock", "42"}},
		{name: "ValueLooksNegative", in: []string{"-E", "-1", "42"}, want: []string{"-E", "-1", "42"}},
		{name: "ValueLooksLikeGroup", in: []string{"--wait", "-ns"}, want: []string{"--wait", "-ns"}, parseFails: true},
		{name: "StopsAtDoubleDash", in: []string{"-n", "--", "-42", "-ns"}, want: []string{"-n", "--", "-42", "-ns"}},
		{name: "StopsAtArgument", in: []string{"42", "-ns"}, want: []string{"42", "-ns"}},
		{name: "UnknownLeftForParse", in: []string{"-nx"}, want: []string{"-nx"}, parseFails: true},
		{name: "HelpLeftForParse", in: []string{"-h"}, want: []string{"-h"}, parseFails: true},
		{name: "NegativeKey", in: []string{"-n", "-42", "cmd"}, wantErr: "-42 reads as a flag"},
		{name: "NegativePair", in: []string{"-7:12", "cmd"}, wantErr: "-7:12 reads as a flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := newFS()
			got, err := expandFlags(fs, c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("expandFlags(%q) = %q, %v; want an error saying %q", c.in, got, err, c.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("expandFlags(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
			if err := fs.Parse(got); err != nil && !c.parseFails {
				t.Errorf("flag.Parse(%q): %v", got, err)
			}
		})
	}
}

// TestShellUsage checks the command line as a shell user writes it:
// combined flags, negative keys, --version, and the checks of --limit.
func TestShellUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "CombinedFlagsParse", args: []string{"exec", "-nw", "1s", "1", "--", "true"}, code: exitUsage, stderr: "-n and -w exclude each other"},
		{name: "CombinedWithValue", args: []string{"exec", "-nw1s", "1", "--", "true"}, code: exitUsage, stderr: "-n and -w exclude each other"},
		{name: "NegativeKeyHint", args: []string{"exec", "-42", "true"}, code: exitUsage,
			stderr: `pgadvisory exec: key -42 reads as a flag; put a negative key after "--": pgadvisory exec [flags] -- -42 command`},
		{name: "NegativeKeyHintAfterFlags", args: []string{"exec", "-n", "-7:1", "true"}, code: exitUsage, stderr: "pgadvisory exec [flags] -- -7:1 command"},
		{name: "KeyNegativeHint", args: []string{"key", "-5"}, code: exitUsage, stderr: "pgadvisory key -- -5"},
		{name: "LocksNegativeIsUnknown", args: []string{"locks", "-5"}, code: exitUsage, stderr: "flag provided but not defined: -5"},
		{name: "Version", args: []string{"--version"}, code: 0, stdout: "pgadvisory "},
		{name: "VersionOneDash", args: []string{"-version"}, code: 0, stdout: "pgadvisory "},
		{name: "VersionCommand", args: []string{"version"}, code: 0, stdout: "pgadvisory "},
		{name: "VersionExtra", args: []string{"version", "x"}, code: exitUsage, stderr: "unexpected argument"},
		{name: "VersionListed", args: []string{"help"}, code: 0, stdout: "version     print pgadvisory's version"},
		{name: "ExitCodesTopic", args: []string{"help", "exit-codes"}, code: 0, stdout: "64     the command line is wrong"},
		{name: "LimitRange", args: []string{"exec", "--limit", "-1", "1", "--", "true"}, code: exitUsage, stderr: "--limit -1: the number of slots is from 1 to 65536"},
		{name: "LimitTooMany", args: []string{"exec", "--limit", "65537", "1", "--", "true"}, code: exitUsage, stderr: "from 1 to 65536"},
		{name: "LimitShared", args: []string{"exec", "--limit", "2", "-s", "1", "--", "true"}, code: exitUsage, stderr: "--limit and -s exclude each other"},
		{name: "LimitPastBigint", args: []string{"exec", "--limit", "3", "9223372036854775806", "--", "true"}, code: exitUsage, stderr: "would pass the largest bigint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runInProcess(t, nil, c.args...)
			if code != c.code || !strings.Contains(stdout, c.stdout) || !strings.Contains(stderr, c.stderr) {
				t.Errorf("pgadvisory %q: exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout %q, stderr %q", c.args, code, c.code, stdout, stderr, c.stdout, c.stderr)
			}
		})
	}
}

func TestVersionLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{name: "Unknown", want: "pgadvisory devel "},
		{name: "Released", ok: true, info: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}},
			want: "pgadvisory v1.2.3 go1.26.0"},
		{name: "Devel", ok: true, info: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			want: "pgadvisory devel go1.26.0"},
		{name: "DevelWithCommit", ok: true, info: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}},
			want: "pgadvisory devel (0123456789ab, modified) go1.26.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := versionLine(c.info, c.ok); !strings.HasPrefix(got, c.want) {
				t.Errorf("versionLine = %q, want %q", got, c.want)
			}
		})
	}
}

func TestConnEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		dsn  string
		env  map[string]string // what pgadvisory inherited
		want []string
		not  []string // variables it must not set
	}{
		{
			name: "URL",
			dsn:  "postgres://app:s%40cret@db.example:6432/billing?sslmode=verify-full&application_name=nightly&connect_timeout=3",
			want: []string{"PGHOST=db.example", "PGPORT=6432", "PGUSER=app", "PGPASSWORD=s@cret", "PGDATABASE=billing",
				"PGSSLMODE=verify-full", "PGAPPNAME=nightly", "PGCONNECT_TIMEOUT=3"},
		},
		{
			name: "URLMultiHost",
			dsn:  "postgresql://app@a.example:5432,b.example:5433/db?target_session_attrs=read-write",
			want: []string{"PGHOST=a.example,b.example", "PGPORT=5432,5433", "PGTARGETSESSIONATTRS=read-write"},
		},
		{
			name: "URLIPv6",
			dsn:  "postgres://app@[::1]:5440/db",
			want: []string{"PGHOST=::1", "PGPORT=5440"},
		},
		{
			name: "URLSocketInQuery",
			dsn:  "postgres:///db?host=/var/run/postgresql&user=app",
			want: []string{"PGHOST=/var/run/postgresql", "PGUSER=app", "PGDATABASE=db"},
		},
		{
			name: "URLSSLTrue",
			dsn:  "postgres://app@h/db?ssl=true",
			want: []string{"PGSSLMODE=require"},
		},
		{
			name: "KeywordValue",
			dsn:  `host=db.example port=6432 dbname=billing user=app password='it\'s' sslmode=require options='-c search_path=x'`,
			want: []string{"PGHOST=db.example", "PGPORT=6432", "PGDATABASE=billing", "PGUSER=app", "PGSSLMODE=require", "PGOPTIONS=-c search_path=x", "PGPASSWORD=it's"},
		},
		{
			name: "KeywordValueEscapes",
			dsn:  `host=db password='a\'b c' user=x\ y`,
			want: []string{"PGPASSWORD=a'b c", "PGUSER=x y"},
		},
		{
			name: "NoPasswordNotPassed",
			dsn:  "postgres://app@db.example/billing",
			env:  map[string]string{"PGPASSWORD": "from-env"},
			not:  []string{"PGPASSWORD"},
		},
		{
			name: "PgxOwnSettingsLeftOut",
			dsn:  "postgres://app@db.example/billing?pool_max_conns=4&default_query_exec_mode=exec",
			not:  []string{"PGPOOL_MAX_CONNS"},
			want: []string{"PGHOST=db.example"},
		},
		{
			name: "ServerParametersInOptions",
			dsn:  "postgres://app@db.example/billing?search_path=app,public&statement_timeout=5s&pool_max_conns=4",
			want: []string{"PGOPTIONS=-c search_path=app,public -c statement_timeout=5s"},
		},
		{
			name: "ServerParametersAfterOptions",
			dsn:  `host=db options='-c work_mem=64MB' search_path='my app'`,
			want: []string{`PGOPTIONS=-c work_mem=64MB -c search_path=my\ app`},
		},
		{
			name: "ServerParametersAfterInheritedOptions",
			dsn:  "postgres://app@db.example/billing?lock_timeout=2s",
			env:  map[string]string{"PGOPTIONS": "-c work_mem=64MB"},
			want: []string{"PGOPTIONS=-c work_mem=64MB -c lock_timeout=2s"},
		},
		{
			name: "DefaultsFilledIn",
			dsn:  "",
			want: []string{"PGHOST=", "PGPORT=", "PGUSER="}, // as pgx chose them
		},
		{
			name: "InheritedKept",
			dsn:  "postgres:///billing",
			env:  map[string]string{"PGHOST": "db.example", "PGPORT": "6432", "PGUSER": "app"},
			want: []string{"PGDATABASE=billing"},
			not:  []string{"PGHOST", "PGPORT", "PGUSER"}, // inherited, not set again
		},
		{
			name: "ServiceFileNotOverridden",
			dsn:  "service=billing",
			want: []string{"PGSERVICE=billing"},
			not:  []string{"PGHOST", "PGPORT", "PGUSER"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// pgx's own view, with its defaults; only what connEnv
			// uses of it matters here.
			cfg := &pgx.ConnConfig{}
			cfg.Host, cfg.Port, cfg.User = "/tmp", 5432, "runner"
			if parsed, err := pgx.ParseConfig(c.dsn); err == nil {
				cfg.RuntimeParams = parsed.RuntimeParams // the server parameters
			}
			got, err := connEnv(c.dsn, cfg, func(k string) string { return c.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				found := false
				for _, g := range got {
					found = found || g == w || strings.HasSuffix(w, "=") && strings.HasPrefix(g, w)
				}
				if !found {
					t.Errorf("connEnv(%q) = %q, lacks %q", c.dsn, got, w)
				}
			}
			for _, n := range c.not {
				for _, g := range got {
					if strings.HasPrefix(g, n+"=") {
						t.Errorf("connEnv(%q) sets %s", c.dsn, g)
					}
				}
			}
		})
	}
}

func TestWithEnv(t *testing.T) {
	t.Parallel()
	got := withEnv(
		[]string{"HOME=/root", "PGHOST=elsewhere", "DATABASE_URL=postgres://elsewhere", "PGADVISORY_FENCING_TOKEN=1"},
		[]string{"PGHOST=db", "PGADVISORY_LOCK_KEY=42"},
		[]string{"DATABASE_URL", "PGADVISORY_FENCING_TOKEN"})
	want := []string{"HOME=/root", "PGADVISORY_LOCK_KEY=42", "PGHOST=db"}
	if !slices.Equal(got, want) {
		t.Errorf("withEnv = %q, want %q", got, want)
	}
}

func TestWatchHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	var file bytes.Buffer
	w := &watcher{terminal: false}
	w.header(&file, now)
	file.WriteString("table\n")
	w.header(&file, now)
	if want := "2025-03-04 05:06:07\n\ntable\n\n2025-03-04 05:06:07\n\n"; file.String() != want {
		t.Errorf("into a file: %q, want %q", file.String(), want)
	}
	var tty bytes.Buffer
	(&watcher{terminal: true}).header(&tty, now)
	if !strings.HasPrefix(tty.String(), "\033[H\033[2J") {
		t.Errorf("on a terminal: %q, want the screen cleared", tty.String())
	}
	if isTerminal(&file) {
		t.Error("a buffer is a terminal")
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		d    time.Duration
		want string
	}{
		{1536687 * time.Microsecond, "1.537"},
		{0, "0"},
		{1500 * time.Millisecond, "1.5"},
		{499 * time.Microsecond, "0"},
		{2*time.Hour + 1, "7200"},
	}
	for _, c := range cases {
		var b bytes.Buffer
		if err := json.NewEncoder(&b).Encode(seconds(c.d)); err != nil || strings.TrimSpace(b.String()) != c.want {
			t.Errorf("seconds(%v) encodes as %q, %v; want %s", c.d, b.String(), err, c.want)
		}
	}
}

func TestSignalName(t *testing.T) {
	t.Parallel()
	for s, want := range map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGHUP: "SIGHUP"} {
		if got := signalName(s); got != want {
			t.Errorf("signalName(%d) = %q, want %q", s, got, want)
		}
	}
}

func TestDescribeHolders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   []holder
		want string
	}{
		{nil, ""},
		{[]holder{{pid: 42, app: "billing-api", age: 123 * time.Second}}, `pid 42 (application_name "billing-api", for at most 2m3s, its session's age)`},
		{[]holder{{pid: 42, age: -1}}, "pid 42"},
		{[]holder{{pid: 1, age: -1}, {pid: 2, app: "x", age: -1}}, `pid 1 and pid 2 (application_name "x")`},
		{[]holder{{pid: 1, age: -1}, {pid: 2, age: -1}, {pid: 3, age: -1}, {pid: 4, age: -1}, {pid: 5, age: -1}}, "pid 1, pid 2, pid 3 and 2 more"},
	}
	for _, c := range cases {
		if got := describeHolders(c.in); got != c.want {
			t.Errorf("describeHolders(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNoServer runs every command that needs the database with none to
// reach: each exits with 69, and says why once.
func TestNoServer(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://app@127.0.0.1:1/app?connect_timeout=5"
	cases := []struct {
		name string
		args []string
		say  string
	}{
		{"Exec", []string{"exec", "--dsn", dsn, "1", "--", "true"}, ""},
		{"Locks", []string{"locks", "--dsn", dsn}, ""},
		{"Release", []string{"release", "--dsn", dsn, "--pid", "1", "--force"}, ""},
		{"Serve", []string{"serve", "--dsn", dsn, "--listen", "127.0.0.1:0"}, ""},
		{"KeyName", []string{"key", "--dsn", dsn, "billing:nightly"}, `namespace "billing" is a name, which needs the dictionary table pgadvisory.namespaces on the server`},
		{"ExecName", []string{"exec", "--dsn", dsn, "billing:nightly", "--", "true"}, "give the namespace's number instead (7:nightly if billing is namespace 7)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runInProcess(t, nil, c.args...)
			if code != exitUnavailable {
				t.Errorf("exit %d, want %d\nstderr: %s", code, exitUnavailable, stderr)
			}
			if n := strings.Count(stderr, "connection refused"); n != 1 {
				t.Errorf("the refusal is said %d times, want once:\n%s", n, stderr)
			}
			if !strings.Contains(stderr, c.say) {
				t.Errorf("stderr does not say %q:\n%s", c.say, stderr)
			}
		})
	}
}
