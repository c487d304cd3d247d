//go:build !unix

package main

import (
	"os"
	"syscall"
)

// forwarded lists the signals exec passes on to the command.
var forwarded = []os.Signal{os.Interrupt}

// sigterm is the signal that asks the command to stop when the lock is
// lost; without Unix signals, the command is killed.
var sigterm os.Signal = os.Kill

// signalNumber returns s's number, for the exit code 128+n.
func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// signalName returns s's name, for messages.
func signalName(s os.Signal) string {
	if s == os.Interrupt {
		return "an interrupt"
	}
	return s.String()
}
