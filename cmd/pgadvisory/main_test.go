package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestMain lets pgtest stop the servers, and removes the command's binary
// when the tests pass.
func TestMain(m *testing.M) {
	pgtest.Main(m, func() error {
		if built.dir != "" {
			return os.RemoveAll(built.dir)
		}
		return nil
	})
}

// built is the command's binary, built once for the integration tests: they
// run pgadvisory as a user does, as a process of its own.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// binary returns the path of the command's binary, building it the first
// time.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "pgadvisory-cmd-test-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "pgadvisory")
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a running pgadvisory.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	started        time.Time
}

// cliEnv returns the environment pgadvisory runs in: this process's,
// without anything that names a database, plus extra.
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// start starts pgadvisory with args and env, and stops it at the test's
// end if it still runs.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), args...), stdout: new(syncBuffer), stderr: new(syncBuffer)}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// wait waits for p to exit, at most 30 seconds, and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
		t.Fatalf("pgadvisory %v did not exit within 30s\nstdout: %s\nstderr: %s", p.cmd.Args[1:], p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// awaitOutput waits until p's stdout contains s.
func (p *proc) awaitOutput(t *testing.T, s string) {
	t.Helper()
	err := pgtest.Poll(10*time.Millisecond, func() (bool, error) {
		if p.cmd.ProcessState != nil {
			return false, errors.New("pgadvisory exited")
		}
		return strings.Contains(p.stdout.String(), s), nil
	})
	if err != nil {
		t.Fatalf("waiting for %q on stdout: %v\nstdout: %s\nstderr: %s", s, err, p.stdout, p.stderr)
	}
}

// result is a finished run of pgadvisory.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// runCLI runs pgadvisory to its end.
func runCLI(t *testing.T, env []string, args ...string) result {
	t.Helper()
	p := start(t, env, args...)
	code := p.wait(t)
	return result{code, p.stdout.String(), p.stderr.String(), time.Since(p.started)}
}

// servers runs f for every test server, in a subtest named after it.
func servers(t *testing.T, f func(t *testing.T, s *pgtest.Server)) {
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) { f(t, s) })
	}
}

// ctx returns a context that ends with the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
