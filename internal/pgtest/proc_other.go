//go:build !linux

package pgtest

import (
	"errors"
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
