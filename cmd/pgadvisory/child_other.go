//go:build !linux

package main

import "os/exec"

// startChild starts child and returns a channel that receives what its
// Wait returns. Without Linux's parent-death signal, child outlives a
// pgadvisory that is killed (by SIGKILL, or the OOM killer), and runs on
// without the lock, which the server releases as soon as it sees
// pgadvisory's connection close; docs/cli.md recommends a supervisor.
func startChild(child *exec.Cmd) (<-chan error, error) {
	if err := child.Start(); err != nil {
		return nil, err
	}
	waited := make(chan error, 1)
	go func() { waited <- child.Wait() }()
	return waited, nil
}
