package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// localMaxWait bounds how long a local cluster may take to answer.
const localMaxWait = 60 * time.Second

// debianBinaries is where Debian and Ubuntu install each major version.
const debianBinaries = "/usr/lib/postgresql/*/bin"

// findBinaries returns the directory that holds initdb and postgres:
// PGADVISORY_TEST_PGBIN if set, else the one on PATH, else the highest
// version under /usr/lib/postgresql.
func findBinaries() (string, error) {
	if dir := os.Getenv(envPGBin); dir != "" {
		if !hasBinaries(dir) {
			return "", fmt.Errorf("%s=%s has no initdb and postgres", envPGBin, dir)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); hasBinaries(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(debianBinaries)
	version := func(dir string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if hasBinaries(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("initdb and postgres %w on PATH or in %s", errNotFound, debianBinaries)
}

// hasBinaries reports whether dir holds executable initdb and postgres.
func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// startLocal creates a cluster in a new temporary directory with the
// binaries in bin, starts it on a free port of 127.0.0.1 and waits until it
// answers. As root it runs them as user postgres, since PostgreSQL refuses to
// run as root. A dedicated cluster can be restarted and paused.
func startLocal(ctx context.Context, bin string, extra []string, dedicated bool) (instance, error) {
	owner, err := clusterOwner()
	if err != nil {
		return instance{}, err
	}
	reapStaleClusters()
	// A free port can be taken between our check and the server's bind, so
	// try a few.
	for attempt := 1; ; attempt++ {
		inst, c, err := startCluster(ctx, bin, owner, extra)
		if err == nil && dedicated {
			inst.ctl = c
		}
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 3 {
			return inst, err
		}
	}
}

// clusterDirPrefix starts the name of each local cluster's directory.
const clusterDirPrefix = "pgadvisory-pgtest-"

// ownerFile, in a cluster's directory, holds the process ID of the test
// binary that created it.
const ownerFile = "owner.pid"

// staleAfter is how old a cluster directory without an owner file must be
// before another test binary removes it.
const staleAfter = 10 * time.Minute

// reapStaleClusters removes the directories of local clusters whose test
// binary died: the server dies with the binary, the directory stays.
func reapStaleClusters() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clusterDirPrefix+"*"))
	for _, dir := range dirs {
		owner, err := readPID(filepath.Join(dir, ownerFile))
		switch {
		case err == nil:
			if processAlive(owner) {
				continue
			}
			if pm, err := readPID(filepath.Join(dir, "data", "postmaster.pid")); err == nil && processAlive(pm) {
				continue
			}
		default:
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < staleAfter {
				continue
			}
		}
		os.RemoveAll(dir)
	}
}

// readPID reads the process ID on the first line of a file.
func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// errPortTaken reports that the server could not bind its port.
var errPortTaken = errors.New("port taken")

// startCluster makes one attempt of [startLocal].
func startCluster(ctx context.Context, bin string, owner owner, extra []string) (instance, *cluster, error) {
	dir, err := os.MkdirTemp("", clusterDirPrefix)
	if err != nil {
		return instance{}, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return instance{}, nil, err
	}
	if err := owner.chown(dir); err != nil {
		os.RemoveAll(dir)
		return instance{}, nil, err
	}
	data := filepath.Join(dir, "data")

	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "--auth=trust", "-U", "postgres", "--no-sync",
		"--encoding=UTF8", "--locale=C")
	initdb.Dir = dir
	initdb.SysProcAttr = owner.attr()
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return instance{}, nil, fmt.Errorf("initdb: %w\n%s", err, indent(out))
	}

	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return instance{}, nil, err
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1"}
	c := &cluster{
		postgres: filepath.Join(bin, "postgres"),
		args:     append(append(args, settings...), extra...),
		dir:      dir,
		logPath:  filepath.Join(dir, "postgres.log"),
		owner:    owner,
		dsn:      fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
	}
	if err := c.launch(); err != nil {
		os.RemoveAll(dir)
		return instance{}, nil, err
	}
	var out []byte // the server's output, read once it has stopped
	stop := track(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.halt()
		out, _ = os.ReadFile(c.logPath)
		os.RemoveAll(dir)
	})
	if err := c.waitReady(ctx); err != nil {
		stop()
		if strings.Contains(string(out), "could not bind") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return instance{}, nil, fmt.Errorf("%w\nserver output:\n%s", err, indent(out))
	}
	return instance{dsn: c.dsn, stop: stop}, c, nil
}

// cluster is a local cluster's postmaster, which a dedicated server may
// stop and start again.
type cluster struct {
	postgres string   // the postgres binary
	args     []string // its arguments
	dir      string   // the cluster's directory
	logPath  string   // the server's output, across restarts
	owner    owner
	dsn      string

	mu     sync.Mutex // held across launch, halt, restart and pause
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	paused []int         // the processes stopped by pause, in order
}

var _ control = (*cluster)(nil)

// launch starts the postmaster, its output appended to the log.
func (c *cluster) launch() error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(c.postgres, c.args...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = c.owner.serverAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.cmd, c.exited = cmd, exited
	return nil
}

// halt shuts the postmaster down fast and waits until it has exited, or
// kills it after 15 seconds. A paused cluster runs again first.
func (c *cluster) halt() {
	_ = c.resume()
	_ = c.cmd.Process.Signal(os.Interrupt) // fast shutdown
	select {
	case <-c.exited:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// waitReady waits until the server answers.
func (c *cluster) waitReady(ctx context.Context) error {
	exited := c.exited
	alive := func() error {
		select {
		case <-exited:
			return fmt.Errorf("postgres exited: %v", c.cmd.ProcessState)
		default:
			return nil
		}
	}
	_, err := waitReady(ctx, c.dsn, localMaxWait, alive)
	return err
}

func (c *cluster) restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused != nil {
		return errPaused
	}
	c.halt()
	if err := c.launch(); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		out, _ := os.ReadFile(c.logPath)
		return fmt.Errorf("%w\nserver output:\n%s", err, indent(out))
	}
	return nil
}

// pause stops the postmaster first, so that it starts no more children,
// then each child: PostgreSQL makes every child the leader of a process
// group of its own, so one signal to the postmaster's group would miss them.
func (c *cluster) pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused != nil {
		return errPaused
	}
	pm := c.cmd.Process.Pid
	kids, err := children(pm)
	if err != nil {
		return err
	}
	if err := stopProcess(pm); err != nil {
		return err
	}
	c.paused = []int{pm}
	// Children forked before the stop took effect show up on a second
	// look.
	if again, err := children(pm); err == nil {
		kids = append(kids, again...)
	}
	for _, k := range kids {
		if stopProcess(k) == nil { // a child may have exited meanwhile
			c.paused = append(c.paused, k)
		}
	}
	return nil
}

func (c *cluster) unpause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resume()
}

// resume lets the processes that pause stopped run again, children first.
func (c *cluster) resume() error {
	var errs []error
	for i := len(c.paused) - 1; i >= 0; i-- {
		if err := continueProcess(c.paused[i]); err != nil && i == 0 {
			errs = append(errs, err) // only the postmaster must still be there
		}
	}
	c.paused = nil
	return errors.Join(errs...)
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// indent indents command output for an error message, keeping its end.
func indent(out []byte) string {
	s := strings.TrimSpace(string(out))
	if len(s) > 8<<10 {
		s = "..." + s[len(s)-8<<10:]
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
