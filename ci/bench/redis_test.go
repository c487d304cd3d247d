package bench_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/redis/go-redis/v9"
)

// startRedis starts the host's redis-server on a free loopback port, with
// nothing saved to disk, and returns a client of it. The server stops at
// tb's cleanup. It fails tb when there is no redis-server: ci/bench.sh
// installs Debian's package when it can.
func startRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr != nil {
			tb.Fatalf("bench: redis-server not found on PATH or in /usr/bin: install Debian's package redis-server (%v)", err)
		}
		path = "/usr/bin/redis-server"
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		tb.Fatalf("bench: start redis-server: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	tb.Cleanup(func() { _ = client.Close() })
	pgtest.Await(tb, fmt.Sprintf("redis-server on port %d to answer", port), func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return client.Ping(ctx).Err() == nil, nil
	})
	return client
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
