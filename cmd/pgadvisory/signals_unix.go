//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// forwarded lists the signals exec passes on to the command.
var forwarded = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// sigterm is the signal that asks the command to stop when the lock is
// lost.
var sigterm os.Signal = syscall.SIGTERM

// signalNumber returns s's number, for the exit code 128+n.
func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// signalNames are the names of the signals exec catches, as kill(1)
// writes them.
var signalNames = map[syscall.Signal]string{
	syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGWINCH: "SIGWINCH",
}

// signalName returns s's name, such as SIGTERM, for messages.
func signalName(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		if name, ok := signalNames[n]; ok {
			return name
		}
		return fmt.Sprintf("signal %d", int(n))
	}
	return s.String()
}
