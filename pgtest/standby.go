package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// A Pair is a primary with a streaming hot standby of it, made with
// pg_basebackup -R: the standby follows the primary's WAL asynchronously,
// PostgreSQL's default, answers read-only queries, and refuses writes.
//
// A pair from [Standbys] is shared by the tests of a binary, which may
// read both servers and take locks on either, and may not change the pair.
// A pair from [StartStandbys] belongs to one test, which may also
// [Pair.Cut] the replication stream, [Pair.Kill] the primary and
// [Pair.Promote] the standby: a failover, as a tool such as Patroni makes.
type Pair struct {
	// Name is the primary's name, such as "pg15" or "pg17".
	Name string
	// Version is the servers' major version.
	Version int
	// Primary is the server the standby follows. Its DSN stops
	// answering after [Pair.Kill].
	Primary *Server
	// Standby is the hot standby, named Name + "-standby"; after
	// [Pair.Promote] it is a primary, at the same DSN.
	Standby *Server

	shared  bool
	pool    *dockertest.Pool
	primary *dockertest.Resource
	standby *dockertest.Resource
	stop    func()

	mu                   sync.Mutex
	cut, killed, promote bool
}

// String returns the pair's name.
func (p *Pair) String() string { return p.Name }

// standbyMaxWait bounds the start of a standby, from its base backup to the
// first answer, and each wait of [Pair.AwaitReplay] and [Pair.Promote].
const standbyMaxWait = 60 * time.Second

// standbyDir is where a standby's container keeps its data directory, made
// by pg_basebackup: a directory the image's postgres user owns.
const standbyDir = "/var/lib/postgresql/standby"

// sharedPairs holds the pairs of [Standbys], started once per test binary.
var sharedPairs struct {
	once  sync.Once
	pairs []*Pair
	err   error
}

// Standbys returns one primary with a streaming hot standby per configured
// Docker image, shared by every test of the binary. The first call starts
// them; [Main] stops them when the test binary ends. Tests may read and lock
// on both servers of a shared pair, and wait with [Pair.AwaitReplay]; they
// may not cut, kill or promote it, which [StartStandbys] is for.
//
// Pairs run only in Docker. With PGADVISORY_TEST_DSN set, or with no
// Docker engine, Standbys skips the test, or fails it under CI=true. Under
// go test -short it skips, as [Servers] does.
func Standbys(tb testing.TB) []*Pair {
	tb.Helper()
	skipShort(tb)
	if !mainCalled.Load() {
		tb.Fatal("pgtest: Standbys needs the package's TestMain to call pgtest.Main(m), which stops the servers")
	}
	sharedPairs.once.Do(func() {
		sharedPairs.pairs, sharedPairs.err = startPairs(context.Background(), nil, true)
	})
	if sharedPairs.err != nil {
		report(tb, sharedPairs.err)
	}
	return slices.Clone(sharedPairs.pairs)
}

// StartStandbys starts, for one test, a primary with a streaming hot
// standby per configured Docker image, both with the extra postgres
// arguments args (see [StartServer]). They stop at tb's cleanup. The test
// may cut, kill and promote them. Like [Standbys], it skips the test, or
// fails it under CI=true, when no pair can be started.
func StartStandbys(tb testing.TB, args ...string) []*Pair {
	tb.Helper()
	skipShort(tb)
	pairs, err := startPairs(context.Background(), args, false)
	if err != nil {
		report(tb, err)
	}
	tb.Cleanup(func() {
		for _, p := range pairs {
			p.stop()
		}
	})
	return pairs
}

// startPairs starts one pair per configured image, concurrently.
func startPairs(ctx context.Context, extra []string, shared bool) ([]*Pair, error) {
	if testing.Testing() && testing.Short() {
		return nil, errShort
	}
	if len(list(os.Getenv(envDSN))) > 0 {
		return nil, fmt.Errorf("%s names existing servers, and a standby is made only in Docker; unset it to test standbys", envDSN)
	}
	pool, err := dockerPool(ctx)
	if err != nil {
		return nil, fmt.Errorf("a standby is made only in Docker, which is unreachable: %w", err)
	}
	imgs := images()
	if os.Getenv(envImages) == "" {
		imgs = preferLocal(pool, imgs)
	}
	reapOrphans(pool)
	pairs := make([]*Pair, len(imgs))
	errs := make([]error, len(imgs))
	var wg sync.WaitGroup
	for i, img := range imgs {
		wg.Go(func() {
			pairs[i], errs[i] = startPair(ctx, pool, img, extra)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("standby of %s: %w", img, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, p := range pairs {
			if errs[i] == nil {
				p.stop()
			}
		}
		return nil, err
	}
	var primaries []*Server
	for _, p := range pairs {
		p.shared = shared
		primaries = append(primaries, p.Primary)
	}
	name(primaries)
	for _, p := range pairs {
		p.Name, p.Version = p.Primary.Name, p.Primary.Version
		p.Standby.Name, p.Standby.Version = p.Name+"-standby", p.Version
	}
	return pairs, nil
}

// startPair starts a primary from image, allows replication connections to
// it, and starts a standby from a base backup of it.
func startPair(ctx context.Context, pool *dockertest.Pool, image string, extra []string) (*Pair, error) {
	inst, err := startContainer(ctx, pool, image, extra, true)
	if err != nil {
		return nil, err
	}
	ctl := inst.ctl.(*containerControl)
	p := &Pair{pool: pool, primary: ctl.res, Primary: &Server{DSN: inst.dsn}}
	p.stop = inst.stop
	fail := func(err error) (*Pair, error) {
		p.stop()
		return nil, err
	}
	if p.Primary.Version, err = probe(ctx, inst.dsn); err != nil {
		return fail(err)
	}
	if err := allowReplication(ctx, ctl.res, inst.dsn); err != nil {
		return fail(fmt.Errorf("primary: %w", err))
	}
	ip := containerIP(ctl.res)
	if ip == "" {
		return fail(fmt.Errorf("primary container %.12s has no address on a Docker network", ctl.res.Container.ID))
	}
	res, dsn, stop, err := runStandby(ctx, pool, image, ip, extra)
	if err != nil {
		return fail(err)
	}
	p.standby, p.Standby = res, &Server{DSN: dsn}
	p.stop = func() { stopEach([]func(){inst.stop, stop}) }
	return p, nil
}

// allowReplication adds a pg_hba.conf line that trusts replication
// connections from anywhere, which the images' own lines do not cover (a
// database of "all" excludes replication), and reloads the configuration.
func allowReplication(ctx context.Context, res *dockertest.Resource, dsn string) error {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	var hba string
	if err := db.QueryRowContext(ctx, "SHOW hba_file").Scan(&hba); err != nil {
		return err
	}
	var out tailBuffer
	out.max = 4 << 10
	code, err := res.Exec([]string{"sh", "-c", `echo "host replication all all trust" >>"$1"`, "sh", hba},
		dockertest.ExecOptions{StdOut: &out, StdErr: &out})
	if err == nil && code != 0 {
		err = fmt.Errorf("appending to %s exited with code %d%s", hba, code, out.tail())
	}
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "SELECT pg_catalog.pg_reload_conf()")
	return err
}

// containerIP returns the address of a container on its Docker network.
func containerIP(res *dockertest.Resource) string {
	ns := res.Container.NetworkSettings
	if ns == nil {
		return ""
	}
	if ns.IPAddress != "" {
		return ns.IPAddress
	}
	for _, n := range ns.Networks {
		if n.IPAddress != "" {
			return n.IPAddress
		}
	}
	return ""
}

// standbyScript makes a standby: a base backup of the primary at "$1" with
// a streamed WAL and the recovery settings (-R), then postgres on it with
// the remaining arguments.
const standbyScript = `set -e
host="$1"; shift
pg_basebackup --host="$host" --port=5432 --username=postgres --pgdata=` + standbyDir + ` \
	--write-recovery-conf --wal-method=stream --checkpoint=fast --no-sync
exec postgres -D ` + standbyDir + ` "$@"`

// runStandby starts a standby of the primary at ip:5432 from image, on a
// port of 127.0.0.1 chosen here, and waits until it answers queries. It
// runs as the image's postgres user, whom both the images of
// ci/build-images.sh and the official image have.
func runStandby(ctx context.Context, pool *dockertest.Pool, image, ip string, extra []string) (*dockertest.Resource, string, func(), error) {
	repo, tag := splitImage(image)
	host, _ := os.Hostname()
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, "", nil, err
		}
		cmd := append(append([]string{"sh", "-c", standbyScript, "sh", ip}, settings...), extra...)
		res, err := pool.RunWithOptions(&dockertest.RunOptions{
			Repository:   repo,
			Tag:          tag,
			User:         "postgres",
			Env:          []string{"POSTGRES_HOST_AUTH_METHOD=trust"},
			Cmd:          cmd,
			ExposedPorts: []string{"5432/tcp"},
			PortBindings: map[dc.Port][]dc.PortBinding{
				"5432/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(port)}},
			},
			Labels: map[string]string{labelKind: "1", labelHost: host, labelPID: strconv.Itoa(os.Getpid())},
		}, func(hc *dc.HostConfig) {
			hc.AutoRemove = false // Purge removes it, also after it died
			hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
			hc.ShmSize = 256 << 20
		})
		if err != nil {
			if strings.Contains(err.Error(), "already allocated") && attempt < 3 {
				continue
			}
			return nil, "", nil, fmt.Errorf("standby: %w", err)
		}
		stop := track(func() { _ = pool.Purge(res) })
		_ = res.Expire(containerExpiry)
		logs := &tailBuffer{max: 8 << 10}
		lctx, lcancel := context.WithCancel(context.Background())
		go func() {
			_ = pool.Client.Logs(dc.LogsOptions{
				Context: lctx, Container: res.Container.ID, Follow: true, Stdout: true, Stderr: true,
				OutputStream: logs, ErrorStream: logs,
			})
		}()
		dsn := "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
		alive := func() error {
			c, err := pool.Client.InspectContainer(res.Container.ID)
			if err != nil {
				return fmt.Errorf("standby container %.12s is gone: %w", res.Container.ID, err)
			}
			if !c.State.Running {
				return fmt.Errorf("standby container %.12s exited with code %d", res.Container.ID, c.State.ExitCode)
			}
			return nil
		}
		_, err = waitReady(ctx, dsn, standbyMaxWait, alive)
		lcancel()
		if err != nil {
			stop()
			return nil, "", nil, fmt.Errorf("standby: %w%s", err, logs.tail())
		}
		return res, dsn, stop, nil
	}
}

// AwaitReplay waits until the standby has replayed every WAL record the
// primary had inserted when AwaitReplay was called: what the primary
// committed before the call, a fencing token's sequence included, is then
// on the standby. It fails tb after about a minute, or when the stream is
// cut or the primary killed.
func (p *Pair) AwaitReplay(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	cut, killed := p.cut, p.killed
	p.mu.Unlock()
	if cut || killed {
		tb.Fatalf("pgtest: AwaitReplay on %s: the replication stream is cut or the primary killed", p.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), standbyMaxWait)
	defer cancel()
	if err := p.awaitReplay(ctx); err != nil {
		tb.Fatalf("pgtest: AwaitReplay on %s: %v", p.Name, err)
	}
}

func (p *Pair) awaitReplay(ctx context.Context) error {
	var lsn string
	if err := queryOne(ctx, p.Primary.DSN, "SELECT pg_catalog.pg_current_wal_insert_lsn()::pg_catalog.text", &lsn); err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	db, err := sql.Open("postgres", p.Standby.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		var done bool
		err := db.QueryRowContext(ctx, "SELECT pg_catalog.pg_last_wal_replay_lsn() >= $1::pg_catalog.pg_lsn", lsn).Scan(&done)
		switch {
		case err != nil:
			return fmt.Errorf("standby: %w", err)
		case done:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the standby did not replay up to %s: %w", lsn, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Cut cuts the replication stream: the standby stops receiving the
// primary's WAL, and keeps what it has replayed. The primary does not
// notice, as with asynchronous replication it need not: what it commits
// after Cut is lost at a [Pair.Promote], as the tail of the WAL is when a
// primary dies before its standby received it. Cut returns once the
// standby's WAL receiver has stopped. Only a pair from [StartStandbys] may
// be cut.
func (p *Pair) Cut(tb testing.TB) {
	tb.Helper()
	p.own(tb, "Cut")
	ctx, cancel := context.WithTimeout(context.Background(), standbyMaxWait)
	defer cancel()
	err := p.cutStream(ctx)
	if err != nil {
		tb.Fatalf("pgtest: Cut of %s: %v", p.Name, err)
	}
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

func (p *Pair) cutStream(ctx context.Context) error {
	db, err := sql.Open("postgres", p.Standby.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	// Since PostgreSQL 13 a reload applies a new primary_conninfo: the
	// WAL receiver stops, and with an empty one none starts again.
	for _, q := range []string{"ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_catalog.pg_reload_conf()"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_wal_receiver").Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the WAL receiver did not stop: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Kill kills the primary at once, as a crash or a power cut would: its
// container gets SIGKILL, every backend dies with the postmaster, and
// nothing is written or sent after. Its sessions' clients learn of it only
// when they use their connections. Kill returns once the container has
// stopped. Only a pair from [StartStandbys] may be killed.
func (p *Pair) Kill(tb testing.TB) {
	tb.Helper()
	p.own(tb, "Kill")
	ctx, cancel := context.WithTimeout(context.Background(), standbyMaxWait)
	defer cancel()
	id := p.primary.Container.ID
	if err := p.pool.Client.KillContainer(dc.KillContainerOptions{ID: id, Signal: dc.SIGKILL, Context: ctx}); err != nil {
		tb.Fatalf("pgtest: Kill of %s: container %.12s: %v", p.Name, id, err)
	}
	if _, err := p.pool.Client.WaitContainerWithContext(id, ctx); err != nil {
		tb.Fatalf("pgtest: Kill of %s: wait for container %.12s: %v", p.Name, id, err)
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
}

// Promote promotes the standby to a primary, with pg_promote, and returns
// once it accepts writes, on a new timeline. It replays what it received
// first; what it never received (after [Pair.Cut], or in flight at
// [Pair.Kill]) is lost. Only a pair from [StartStandbys] may be promoted,
// once.
func (p *Pair) Promote(tb testing.TB) {
	tb.Helper()
	p.own(tb, "Promote")
	p.mu.Lock()
	again := p.promote
	p.promote = true
	p.mu.Unlock()
	if again {
		tb.Fatalf("pgtest: Promote of %s: promoted already", p.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), standbyMaxWait)
	defer cancel()
	var ok bool
	if err := queryOne(ctx, p.Standby.DSN, "SELECT pg_catalog.pg_promote(true, 60)", &ok); err != nil || !ok {
		tb.Fatalf("pgtest: Promote of %s: pg_promote = %v, %v", p.Name, ok, err)
	}
}

// MultiHostDSN returns a key=value DSN that names both servers, the
// primary first, with target_session_attrs=attrs (such as "read-write" or
// "primary"): each new connection goes to the first server that answers
// and has those attributes, so that after a failover a pool's new
// connections reach the promoted standby. pgx and lib/pq (since v1.11)
// both accept it; lib/pq does not take several hosts in a URL.
func (p *Pair) MultiHostDSN(attrs string) string {
	hostPort := func(s *Server) (string, string) {
		u, _ := url.Parse(s.DSN)
		return u.Hostname(), u.Port()
	}
	h1, p1 := hostPort(p.Primary)
	h2, p2 := hostPort(p.Standby)
	return "host=" + h1 + "," + h2 + " port=" + p1 + "," + p2 +
		" user=postgres dbname=postgres sslmode=disable connect_timeout=2 target_session_attrs=" + attrs
}

// OpenMultiHost returns a new *sql.DB for driver on [Pair.MultiHostDSN]
// with attrs, closed at tb's cleanup.
func (p *Pair) OpenMultiHost(tb testing.TB, driver, attrs string) *sql.DB {
	tb.Helper()
	db, err := openDB(driver, p.MultiHostDSN(attrs))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// own fails tb when p is shared.
func (p *Pair) own(tb testing.TB, op string) {
	tb.Helper()
	if p.shared {
		tb.Fatalf("pgtest: %s of %s: only a pair from StartStandbys may be cut, killed or promoted, "+
			"never a shared one from Standbys, which other tests use", op, p.Name)
	}
}

// queryOne runs q on a connection of its own to dsn and scans its one
// value into dst.
func queryOne(ctx context.Context, dsn, q string, dst any) error {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRowContext(ctx, q).Scan(dst)
}

// StandbyTarget is one pair and driver that a subtest of [EachStandby]
// runs on.
type StandbyTarget struct {
	// Pair is the pair the subtest runs on.
	Pair *Pair
	// Driver is the database/sql driver both pools use.
	Driver string
	// Primary is a pool on the pair's primary, closed at the subtest's
	// cleanup.
	Primary *sql.DB
	// Standby is a pool on the pair's hot standby, closed at the
	// subtest's cleanup.
	Standby *sql.DB
}

// EachStandby runs f in a subtest for every shared pair of [Standbys] and
// every driver of [Drivers], named "pg15/pq", "pg15/pgx" and so on, with a
// pool on each server of the pair.
func EachStandby(t *testing.T, f func(t *testing.T, tg StandbyTarget)) {
	t.Helper()
	for _, p := range Standbys(t) {
		for _, d := range Drivers {
			t.Run(p.Name+"/"+d, func(t *testing.T) {
				f(t, StandbyTarget{Pair: p, Driver: d, Primary: p.Primary.Open(t, d), Standby: p.Standby.Open(t, d)})
			})
		}
	}
}
