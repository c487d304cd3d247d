//go:build linux

package main

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startChild starts child and returns a channel that receives what its
// Wait returns. The kernel sends child SIGKILL when pgadvisory dies, even
// by SIGKILL (its parent-death signal), so that the command never runs on
// without the lock, which the server releases as soon as it sees
// pgadvisory's connection close. SIGKILL, not SIGTERM: a command that
// caught SIGTERM could go on running unguarded. Only child gets it, not
// the processes child starts.
//
// The kernel sends the signal when the thread that forked child ends, not
// the process, and Go may end a thread while the process lives on. So
// child is started, and waited for, on a goroutine locked to its thread:
// the thread lives as long as child does.
func startChild(child *exec.Cmd) (<-chan error, error) {
	if child.SysProcAttr == nil {
		child.SysProcAttr = new(syscall.SysProcAttr)
	}
	child.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := child.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- child.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}
