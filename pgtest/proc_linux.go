package pgtest

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// owner is the user the local cluster runs as: the current one, or postgres
// when the current one is root.
type owner struct {
	cred *syscall.Credential // nil: the current user
}

// clusterOwner picks the user to run the local cluster as.
func clusterOwner() (owner, error) {
	if os.Geteuid() != 0 {
		return owner{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return owner{}, fmt.Errorf("running as root, and PostgreSQL refuses root: no user postgres to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return owner{}, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return owner{}, err
	}
	return owner{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// chown gives path to the owner.
func (o owner) chown(path string) error {
	if o.cred == nil {
		return nil
	}
	return os.Chown(path, int(o.cred.Uid), int(o.cred.Gid))
}

// attr returns the process attributes for a short-lived command.
func (o owner) attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: o.cred}
}

// serverAttr returns the process attributes for the server: its own process
// group, so that a terminal's interrupt reaches the harness, which stops it
// in order, and SIGQUIT, an immediate shutdown, if the harness dies first.
func (o owner) serverAttr() *syscall.SysProcAttr {
	return o.daemonAttr(syscall.SIGQUIT)
}

// daemonAttr returns the process attributes for a long-lived child such as
// the server or PgBouncer: its own process group, and sig if the harness
// dies first.
func (o owner) daemonAttr(sig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: o.cred, Setpgid: true, Pdeathsig: sig}
}

// children returns the IDs of the processes whose parent is pid, from /proc.
func children(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err != nil || ppid != pid {
			continue
		}
		if kid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
			kids = append(kids, kid)
		}
	}
	return kids, nil
}

// stopProcess freezes a process with SIGSTOP.
func stopProcess(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

// continueProcess lets a process that SIGSTOP froze run again.
func continueProcess(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
