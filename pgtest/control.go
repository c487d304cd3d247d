package pgtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// control restarts and pauses one dedicated server.
type control interface {
	// restart shuts the server down fast, starts it again on the same
	// port and waits until it answers.
	restart(ctx context.Context) error
	// pause freezes the server and every backend, as a frozen host or
	// network would: connections stay open and nothing answers.
	pause() error
	// unpause lets a paused server run again.
	unpause() error
}

// restartMaxWait bounds a restart, from the shutdown to the first answer.
const restartMaxWait = 60 * time.Second

// Restart shuts s down fast, as pg_ctl restart -m fast does, starts it again
// with the same settings, port and DSN, and returns once it answers. Every
// session on s ends, and with it every advisory lock: a test sees what a
// server restart or failover does to its clients. A container gets SIGINT
// (PostgreSQL's fast shutdown) and is started again, the same as
// docker restart with that stop signal; a local cluster's postmaster gets
// SIGINT and is started again.
//
// Only a dedicated server from [StartServer] may be restarted: Restart fails
// tb for a shared server from [Servers], one from PGADVISORY_TEST_DSN, a
// PgBouncer from [Server.PgBouncer] (restart the server behind it), and a
// paused server.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	ctl := s.control(tb, "Restart")
	ctx, cancel := context.WithTimeout(context.Background(), restartMaxWait)
	defer cancel()
	if err := ctl.restart(ctx); err != nil {
		tb.Fatalf("pgtest: restart %s: %v", s.Name, err)
	}
}

// Pause freezes s and every one of its backends, as docker pause does, and
// returns a function that lets them run again. While s is paused,
// connections to it stay open but nothing answers: a test sees what a frozen
// server or a broken network does to its clients, which must give up by
// themselves (a deadline, a keepalive). Nothing is lost on the server: after
// unpause, sessions and their locks carry on.
//
// unpause is safe to call more than once, and runs at tb's cleanup if the
// test has not called it. A container is paused with docker pause; a local
// cluster's postmaster and its children get SIGSTOP, and SIGCONT to unpause,
// which needs Linux (elsewhere Pause skips the test).
//
// Only a dedicated server from [StartServer] may be paused: Pause fails tb
// for a shared server from [Servers], one from PGADVISORY_TEST_DSN, a
// PgBouncer from [Server.PgBouncer] (pause the server behind it), and a
// server already paused.
func (s *Server) Pause(tb testing.TB) (unpause func()) {
	tb.Helper()
	ctl := s.control(tb, "Pause")
	if err := ctl.pause(); err != nil {
		if errors.Is(err, errUnsupported) {
			tb.Skipf("pgtest: pause %s: %v", s.Name, err)
		}
		tb.Fatalf("pgtest: pause %s: %v", s.Name, err)
	}
	var once sync.Once
	unpause = func() {
		once.Do(func() {
			if err := ctl.unpause(); err != nil {
				tb.Errorf("pgtest: unpause %s: %v", s.Name, err)
			}
		})
	}
	tb.Cleanup(unpause)
	return unpause
}

// control returns s's control, or fails tb naming op and why s has none.
func (s *Server) control(tb testing.TB, op string) control {
	tb.Helper()
	switch {
	case s.pooler:
		tb.Fatalf("pgtest: %s of %s: a PgBouncer cannot be restarted or paused; do it to the server behind it", op, s.Name)
	case s.ctl == nil:
		tb.Fatalf("pgtest: %s of %s: only a dedicated server from StartServer may be restarted or paused, "+
			"never a shared one from Servers or PGADVISORY_TEST_DSN, which other tests use", op, s.Name)
	}
	return s.ctl
}

// errPaused reports a restart or pause of a server that is paused.
var errPaused = errors.New("the server is paused; unpause it first")

// errUnsupported reports that this system cannot do what was asked.
var errUnsupported = errors.New("not supported here")

// containerControl restarts and pauses a dedicated container.
type containerControl struct {
	pool  *dockertest.Pool
	res   *dockertest.Resource
	dsn   string
	alive func() error

	mu     sync.Mutex
	paused bool
}

var _ control = (*containerControl)(nil)

func (c *containerControl) restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return errPaused
	}
	id := c.res.Container.ID
	// Containers from dockertest stop with SIGWINCH, which PostgreSQL
	// ignores, and then SIGKILL: send the fast shutdown's signal instead.
	if err := c.pool.Client.KillContainer(dc.KillContainerOptions{ID: id, Signal: dc.SIGINT, Context: ctx}); err != nil {
		return fmt.Errorf("container %.12s: SIGINT: %w", id, err)
	}
	if _, err := c.pool.Client.WaitContainerWithContext(id, ctx); err != nil {
		return fmt.Errorf("container %.12s: wait for the shutdown: %w", id, err)
	}
	if err := c.pool.Client.StartContainerWithContext(id, nil, ctx); err != nil {
		return fmt.Errorf("container %.12s: start: %w", id, err)
	}
	// The stop the expiry had pending ended with the container; arm
	// it again.
	_ = c.res.Expire(containerExpiry)
	if _, err := waitReady(ctx, c.dsn, restartMaxWait, c.alive); err != nil {
		return fmt.Errorf("container %.12s after restart: %w", id, err)
	}
	return nil
}

func (c *containerControl) pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return errPaused
	}
	var err error
	for try := 1; ; try++ {
		err = c.pool.Client.PauseContainer(c.res.Container.ID)
		// The cgroup freezer gives up when a process does not stop in
		// time, as one in the middle of a disk write may not, and
		// thaws the container again: "unable to freeze". Another try
		// finds it stopped elsewhere.
		if err == nil || try == pauseTries || !strings.Contains(err.Error(), "unable to freeze") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	c.paused = true
	return nil
}

// pauseTries bounds the tries of a pause that the freezer refused.
const pauseTries = 10

func (c *containerControl) unpause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused {
		return nil
	}
	if err := c.pool.Client.UnpauseContainer(c.res.Container.ID); err != nil {
		return err
	}
	c.paused = false
	return nil
}
