package pgtest

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	dc "github.com/ory/dockertest/v3/docker"
)

// crasher is the control of a dedicated server that can also crash it.
type crasher interface {
	// crash stops the server the way a crash does, starts it again on
	// the same port and waits until it answers.
	crash(ctx context.Context) error
}

var (
	_ crasher = (*containerControl)(nil)
	_ crasher = (*cluster)(nil)
)

// Crash stops s as a crash would, starts it again with the same settings,
// port and DSN, and returns once it answers, after crash recovery. Unlike
// [Server.Restart], nothing is shut down in order: WAL that the server had
// not yet written is lost, as with synchronous_commit = off a transaction
// that was reported committed may be, and the start replays what was
// written. Every session on s ends, and with it every advisory lock.
//
// A container gets SIGKILL, which ends every process in it at once; a
// local cluster's postmaster gets SIGQUIT, PostgreSQL's immediate
// shutdown, in which no process writes anything more. Either way the
// operating system keeps what the server had written, so with fsync off,
// as the harness runs servers, Crash shows a crash of the server's
// processes, not of the machine.
//
// Only a dedicated server from [StartServer] may be crashed, as for
// [Server.Restart].
func (s *Server) Crash(tb testing.TB) {
	tb.Helper()
	ctl, ok := s.control(tb, "Crash").(crasher)
	if !ok {
		tb.Fatalf("pgtest: crash %s: its control cannot crash it", s.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), restartMaxWait)
	defer cancel()
	if err := ctl.crash(ctx); err != nil {
		tb.Fatalf("pgtest: crash %s: %v", s.Name, err)
	}
}

func (c *containerControl) crash(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return errPaused
	}
	id := c.res.Container.ID
	if err := c.pool.Client.KillContainer(dc.KillContainerOptions{ID: id, Signal: dc.SIGKILL, Context: ctx}); err != nil {
		return fmt.Errorf("container %.12s: SIGKILL: %w", id, err)
	}
	if _, err := c.pool.Client.WaitContainerWithContext(id, ctx); err != nil {
		return fmt.Errorf("container %.12s: wait for the kill: %w", id, err)
	}
	if err := c.pool.Client.StartContainerWithContext(id, nil, ctx); err != nil {
		return fmt.Errorf("container %.12s: start: %w", id, err)
	}
	_ = c.res.Expire(containerExpiry) // as in restart
	if _, err := waitReady(ctx, c.dsn, restartMaxWait, c.alive); err != nil {
		return fmt.Errorf("container %.12s after the crash: %w", id, err)
	}
	return nil
}

func (c *cluster) crash(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused != nil {
		return errPaused
	}
	// SIGKILL would leave the postmaster's children running, attached
	// to its shared memory, and a new postmaster refuses to start beside
	// them. An immediate shutdown ends them without a write.
	if err := c.cmd.Process.Signal(syscall.SIGQUIT); err != nil && err != os.ErrProcessDone {
		return fmt.Errorf("postmaster: SIGQUIT: %w", err)
	}
	select {
	case <-c.exited:
	case <-ctx.Done():
		return fmt.Errorf("postmaster did not exit after SIGQUIT: %w", ctx.Err())
	}
	if err := c.launch(); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		out, _ := os.ReadFile(c.logPath)
		return fmt.Errorf("%w\nserver output:\n%s", err, indent(out))
	}
	return nil
}
