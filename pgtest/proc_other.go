//go:build !linux

package pgtest

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// owner is the user the local cluster runs as: always the current one here.
type owner struct{}

// clusterOwner picks the user to run the local cluster as.
func clusterOwner() (owner, error) {
	if os.Geteuid() == 0 {
		return owner{}, errors.New("running as root, and PostgreSQL refuses root: run the tests as another user")
	}
	return owner{}, nil
}

// chown gives path to the owner.
func (owner) chown(string) error { return nil }

// attr returns the process attributes for a short-lived command.
func (owner) attr() *syscall.SysProcAttr { return nil }

// serverAttr returns the process attributes for the server.
func (owner) serverAttr() *syscall.SysProcAttr { return nil }

// daemonAttr returns the process attributes for a long-lived child.
func (owner) daemonAttr(os.Signal) *syscall.SysProcAttr { return nil }

// children would list a process's children; pausing a local cluster needs
// Linux.
func children(int) ([]int, error) {
	return nil, fmt.Errorf("pausing a local cluster needs Linux: %w", errUnsupported)
}

// stopProcess is never reached: [children] fails first.
func stopProcess(int) error { return errUnsupported }

// continueProcess is never reached: [children] fails first.
func continueProcess(int) error { return errUnsupported }
