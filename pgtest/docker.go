package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// Labels on every container the harness starts. The owner labels let a
// later test binary remove the containers of one that died.
const (
	labelKind = "pgadvisory.pgtest"
	labelHost = "pgadvisory.pgtest.host"
	labelPID  = "pgadvisory.pgtest.pid"
)

// containerMaxWait bounds how long a container may take to answer.
const containerMaxWait = 60 * time.Second

// containerExpiry is a safety net: a container left running this long after
// its start is stopped, and so removed.
const containerExpiry = 1500 // seconds: longer than ci/test.sh's -timeout 15m

// dockerPool connects to the Docker engine that the environment names
// (DOCKER_HOST, or the default socket) and checks that it answers.
func dockerPool(ctx context.Context) (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		return nil, err
	}
	pool.MaxWait = containerMaxWait
	return pool, nil
}

// startContainers starts one container per image, concurrently. When any
// fails, it stops the others and returns every error.
func startContainers(ctx context.Context, pool *dockertest.Pool, imgs []string, extra []string, dedicated bool) ([]instance, error) {
	reapOrphans(pool)
	insts := make([]instance, len(imgs))
	errs := make([]error, len(imgs))
	var wg sync.WaitGroup
	for i, img := range imgs {
		wg.Go(func() {
			insts[i], errs[i] = startContainer(ctx, pool, img, extra, dedicated)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i := range insts {
			if errs[i] == nil {
				insts[i].stop()
			}
		}
		return nil, err
	}
	return insts, nil
}

// startContainer runs image with 5432/tcp on a random port of 127.0.0.1 and
// waits until the server answers. A dedicated container gets a port chosen
// here rather than by Docker, which picks a new one at each start, so that
// its DSN outlives [containerControl.restart]; a port taken meanwhile is
// tried again with another.
func startContainer(ctx context.Context, pool *dockertest.Pool, image string, extra []string, dedicated bool) (instance, error) {
	repo, tag := splitImage(image)
	if _, err := pool.Client.InspectImage(repo + ":" + tag); err != nil && strings.HasPrefix(repo, "pgadvisory/") {
		return instance{}, fmt.Errorf("image %s is not there; ci/build-images.sh builds it: %w", image, err)
	}
	for attempt := 1; ; attempt++ {
		hostPort := ""
		if dedicated {
			port, err := freePort()
			if err != nil {
				return instance{}, err
			}
			hostPort = strconv.Itoa(port)
		}
		inst, err := runContainer(ctx, pool, image, repo, tag, hostPort, extra)
		if err == nil || hostPort == "" || !strings.Contains(err.Error(), "already allocated") || attempt == 3 {
			return inst, err
		}
	}
}

// runContainer makes one attempt of [startContainer], on hostPort of
// 127.0.0.1, or on a port Docker picks when hostPort is "". A container with
// a fixed port is dedicated: it is not removed when it stops, so that it can
// be restarted; stopping it through the harness removes it all the same.
func runContainer(ctx context.Context, pool *dockertest.Pool, image, repo, tag, hostPort string, extra []string) (instance, error) {
	dedicated := hostPort != ""
	host, _ := os.Hostname()
	cmd := append(append([]string{"postgres"}, settings...), extra...)
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: repo,
		Tag:        tag,
		// The official image refuses to start without a password unless
		// told to trust; images built by ci/build-images.sh always trust.
		Env:          []string{"POSTGRES_HOST_AUTH_METHOD=trust"},
		Cmd:          cmd,
		ExposedPorts: []string{"5432/tcp"},
		PortBindings: map[dc.Port][]dc.PortBinding{
			"5432/tcp": {{HostIP: "127.0.0.1", HostPort: hostPort}},
		},
		Labels: map[string]string{
			labelKind: "1",
			labelHost: host,
			labelPID:  strconv.Itoa(os.Getpid()),
		},
	}, func(hc *dc.HostConfig) {
		// Docker removes a stopped container with AutoRemove even while
		// it restarts it, so a dedicated container, which may be
		// restarted, relies on Purge and reapOrphans instead.
		hc.AutoRemove = !dedicated
		hc.PublishAllPorts = false
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
		hc.ShmSize = 256 << 20 // parallel query uses /dev/shm; Docker's default is 64 MiB
	})
	if err != nil {
		return instance{}, fmt.Errorf("image %s: %w", image, err)
	}
	id := res.Container.ID
	stop := track(func() { _ = pool.Purge(res) })
	_ = res.Expire(containerExpiry)

	// Follow the container's output from the start, so that a container
	// that exits at once, and is removed, still explains why.
	logs := &tailBuffer{max: 8 << 10}
	lctx, lcancel := context.WithCancel(context.Background())
	defer lcancel()
	go func() {
		_ = pool.Client.Logs(dc.LogsOptions{
			Context: lctx, Container: id, Follow: true, Stdout: true, Stderr: true,
			OutputStream: logs, ErrorStream: logs,
		})
	}()

	addr := res.GetHostPort("5432/tcp")
	if addr == "" {
		stop()
		return instance{}, fmt.Errorf("image %s: container %.12s has no port for 5432/tcp", image, id)
	}
	dsn := "postgres://postgres@" + addr + "/postgres?sslmode=disable"
	alive := func() error {
		c, err := pool.Client.InspectContainer(id)
		if err != nil {
			return fmt.Errorf("container %.12s is gone: %w", id, err)
		}
		if !c.State.Running {
			return fmt.Errorf("container %.12s exited with code %d", id, c.State.ExitCode)
		}
		return nil
	}
	if _, err := waitReady(ctx, dsn, containerMaxWait, alive); err != nil {
		stop()
		return instance{}, fmt.Errorf("image %s: %w%s", image, err, logs.tail())
	}
	inst := instance{dsn: dsn, stop: stop}
	if dedicated {
		inst.ctl = &containerControl{pool: pool, res: res, dsn: dsn, alive: alive}
	}
	return inst, nil
}

// splitImage splits "repo:tag" into its parts; the tag defaults to latest.
// A colon before the last slash belongs to a registry's port.
func splitImage(image string) (repo, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}

// reapOrphans removes the containers that test binaries on this host
// started and left behind when they died.
func reapOrphans(pool *dockertest.Pool) {
	host, _ := os.Hostname()
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": {labelKind, labelHost + "=" + host}},
	})
	if err != nil {
		return
	}
	for _, c := range cs {
		pid, err := strconv.Atoi(c.Labels[labelPID])
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true})
	}
}

// processAlive reports whether a process with that ID exists.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// Write implements io.Writer.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

// tail returns the kept output as an indented block for an error message,
// or "" when there is none.
func (b *tailBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := bytes.TrimSpace(b.buf)
	if len(out) == 0 {
		return ""
	}
	return "\nserver output:\n    " + strings.ReplaceAll(string(out), "\n", "\n    ")
}

// localImages are the images ci/build-images.sh builds, newest first.
var localImages = []string{"pgadvisory/postgres:17", "pgadvisory/postgres:15"}

// preferLocal returns the newest image ci/build-images.sh has built, when
// one is present, instead of imgs: a machine without a registry cannot
// pull the default image, and one that ran the test command has these.
func preferLocal(pool *dockertest.Pool, imgs []string) []string {
	for _, img := range localImages {
		if _, err := pool.Client.InspectImage(img); err == nil {
			return []string{img}
		}
	}
	return imgs
}
