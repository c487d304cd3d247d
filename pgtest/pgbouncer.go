package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envPgBouncer names the pgbouncer binary, overriding the search.
const envPgBouncer = "PGADVISORY_TEST_PGBOUNCER"

// pgbouncerPaths are where Debian's pgbouncer package puts the binary, for
// a PATH without the sbin directories.
var pgbouncerPaths = []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer"}

// pgbouncerMaxWait bounds how long PgBouncer may take to answer.
const pgbouncerMaxWait = 30 * time.Second

// pgbouncerMaxClients is PgBouncer's max_client_conn.
const pgbouncerMaxClients = 500

// PgBouncer starts a PgBouncer in transaction pooling mode in front of s and
// returns a server whose DSN leads through it, named s.Name + "-pgbouncer".
// PgBouncer stops at tb's cleanup. It listens on a free port of 127.0.0.1,
// trusts every client, and opens at most poolSize connections to s
// (default_pool_size), which its clients share: each transaction, and each
// statement outside one, may run on any of them. That is the pooler that
// breaks session locks silently; transaction locks work through it.
//
// [Server.Open] and [Server.OpenDB] on the returned server add what each
// driver needs to work through transaction pooling at all, where a prepared
// statement made on one backend is not there on the next: for pgx
// default_query_exec_mode=exec (one round trip with an unnamed statement,
// nothing cached), for lib/pq binary_parameters=yes (parse, bind and
// execute in one round trip, where by default a query with arguments takes
// two, which may land on two backends).
//
// The pgbouncer binary comes from PGADVISORY_TEST_PGBOUNCER, PATH,
// /usr/sbin or /usr/local/sbin; Debian's package pgbouncer installs it and
// ci/test.sh installs that. PgBouncer refuses to run as root: as root, the
// harness runs it as user postgres, as it does a local cluster. Without the
// binary, PgBouncer skips the test, or fails it under CI=true; under
// go test -short it skips, as [Servers] does.
//
// Restarting or pausing s through [Server.Restart] and [Server.Pause] keeps
// the PgBouncer: its clients see what a pooler's clients see.
func (s *Server) PgBouncer(tb testing.TB, poolSize int) *Server {
	tb.Helper()
	return s.pgBouncer(tb, poolSize, false)
}

// PgBouncerResetting is [Server.PgBouncer] with a PgBouncer that resets
// every server connection each time it goes back to the pool: after every
// transaction, and every statement outside one. It sets
// server_reset_query = DISCARD ALL and server_reset_query_always = 1
// (PgBouncer 1.18 and later read both). DISCARD ALL releases every
// session advisory lock and resets every session setting, so nothing a
// client leaves on a backend outlives its own transaction: the operator's
// remedy for session locks taken through a transaction pooler (see
// docs/leases.md, "Through a transaction pooler"). It costs one more
// statement per transaction. The returned server is named
// s.Name + "-pgbouncer-reset".
func (s *Server) PgBouncerResetting(tb testing.TB, poolSize int) *Server {
	tb.Helper()
	return s.pgBouncer(tb, poolSize, true)
}

// pgBouncer starts the PgBouncer of [Server.PgBouncer], one that resets
// every server connection after every transaction when reset is true.
func (s *Server) pgBouncer(tb testing.TB, poolSize int, reset bool) *Server {
	tb.Helper()
	skipShort(tb)
	if poolSize < 1 {
		tb.Fatalf("pgtest: PgBouncer for %s: pool size %d, want at least 1", s.Name, poolSize)
	}
	if s.pooler {
		tb.Fatalf("pgtest: PgBouncer for %s: it is a PgBouncer already", s.Name)
	}
	bin, err := findPgBouncer()
	if err != nil {
		report(tb, err)
	}
	b, err := startPgBouncer(context.Background(), bin, s.DSN, poolSize, reset)
	if err != nil {
		report(tb, fmt.Errorf("PgBouncer for %s: %w", s.Name, err))
	}
	tb.Cleanup(b.stop)
	name := s.Name + "-pgbouncer"
	if reset {
		name += "-reset"
	}
	return &Server{Name: name, Version: s.Version, DSN: b.dsn, pooler: true}
}

// findPgBouncer returns the path of the pgbouncer binary.
func findPgBouncer() (string, error) {
	if p := os.Getenv(envPgBouncer); p != "" {
		if !executable(p) {
			return "", fmt.Errorf("%s=%s is not an executable file", envPgBouncer, p)
		}
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range pgbouncerPaths {
		if executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("pgbouncer %w on PATH or in %s: install Debian's package pgbouncer, or set %s",
		errNotFound, strings.Join(pgbouncerPaths, ", "), envPgBouncer)
}

// executable reports whether path is an executable file.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// startPgBouncer starts pgbouncer in front of the server at dsn and waits
// until it answers; a port taken between the check and the bind is tried
// again with another. With reset, PgBouncer resets every server
// connection after every transaction (see [pgbouncerReset]).
func startPgBouncer(ctx context.Context, bin, dsn string, poolSize int, reset bool) (instance, error) {
	owner, err := clusterOwner()
	if err != nil {
		return instance{}, err
	}
	for attempt := 1; ; attempt++ {
		inst, err := runPgBouncer(ctx, bin, owner, dsn, poolSize, reset)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 3 {
			return inst, err
		}
	}
}

// runPgBouncer makes one attempt of [startPgBouncer].
func runPgBouncer(ctx context.Context, bin string, owner owner, dsn string, poolSize int, reset bool) (instance, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Hostname() == "" {
		return instance{}, fmt.Errorf("the DSN %s is not a host:port URL", redact(dsn))
	}
	port, err := freePort()
	if err != nil {
		return instance{}, err
	}
	dir, err := os.MkdirTemp("", "pgadvisory-pgbouncer-")
	if err != nil {
		return instance{}, err
	}
	user := u.User.Username()
	if user == "" {
		user = "postgres"
	}
	password, _ := u.User.Password()
	conf := pgbouncerConfig(u.Hostname(), u.Port(), port, poolSize, filepath.Join(dir, "userlist.txt"))
	if reset {
		conf += pgbouncerReset
	}
	files := map[string]string{
		"pgbouncer.ini": conf,
		// trust needs the user listed; the password, if any, is the one
		// PgBouncer logs in to the server with.
		"userlist.txt": fmt.Sprintf("%q %q\n", user, password),
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		err := os.WriteFile(path, []byte(text), 0o600)
		if err == nil {
			err = owner.chown(path)
		}
		if err != nil {
			os.RemoveAll(dir)
			return instance{}, err
		}
	}
	if err := owner.chown(dir); err != nil {
		os.RemoveAll(dir)
		return instance{}, err
	}

	logs := &tailBuffer{max: 8 << 10}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = owner.daemonAttr(syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return instance{}, fmt.Errorf("pgbouncer: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := track(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	})

	u.Host = "127.0.0.1:" + strconv.Itoa(port)
	bdsn := u.String()
	alive := func() error {
		select {
		case <-exited:
			return fmt.Errorf("pgbouncer exited: %v", cmd.ProcessState)
		default:
			return nil
		}
	}
	if _, err := waitReady(ctx, bdsn, pgbouncerMaxWait, alive); err != nil {
		stop()
		out := logs.tail()
		if strings.Contains(out, "in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return instance{}, fmt.Errorf("%w%s", err, out)
	}
	return instance{dsn: bdsn, stop: stop}, nil
}

// pgbouncerConfig returns a pgbouncer.ini for PgBouncer 1.18 and later:
// transaction pooling of every database on host:port (port "" is 5432),
// listening on 127.0.0.1:listen.
func pgbouncerConfig(host, port string, listen, poolSize int, userlist string) string {
	if port == "" {
		port = "5432"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[databases]\n* = host=%s port=%s\n\n", host, port)
	b.WriteString("[pgbouncer]\n")
	for _, kv := range [][2]string{
		{"listen_addr", "127.0.0.1"},
		{"listen_port", strconv.Itoa(listen)},
		{"unix_socket_dir", ""}, // TCP only
		{"auth_type", "trust"},
		{"auth_file", userlist},
		{"pool_mode", "transaction"},
		{"default_pool_size", strconv.Itoa(poolSize)},
		{"min_pool_size", "0"},
		{"reserve_pool_size", "0"},
		{"max_client_conn", strconv.Itoa(pgbouncerMaxClients)},
		// lib/pq sends extra_float_digits at startup, which PgBouncer
		// would refuse.
		{"ignore_startup_parameters", "extra_float_digits"},
		// After a restart of the server, log in again within a second
		// rather than the default 15.
		{"server_login_retry", "1"},
		{"server_connect_timeout", "5"},
		{"logfile", ""}, // stderr
		{"pidfile", ""},
		{"log_connections", "0"},
		{"log_disconnections", "0"},
	} {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	return b.String()
}

// pgbouncerReset are the lines of pgbouncer.ini, after those of
// [pgbouncerConfig], that make PgBouncer run DISCARD ALL on a server
// connection whenever it goes back to the pool. By default PgBouncer runs
// server_reset_query only in session pooling mode; server_reset_query_always
// runs it in transaction mode too, after every transaction.
const pgbouncerReset = "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1\n"
