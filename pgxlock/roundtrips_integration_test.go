package pgxlock_test

import (
	"context"
	"database/sql"
	"errors"
	mrand "math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// execModes are pgx's query exec modes, each of which sends a statement
// with arguments its own way.
var execModes = []struct {
	name string
	mode pgx.QueryExecMode
	// argTrips is the round trips of one statement with arguments once
	// the connection is warm: describe_exec describes every one first.
	argTrips int64
}{
	{"CacheStatement", pgx.QueryExecModeCacheStatement, 1},
	{"CacheDescribe", pgx.QueryExecModeCacheDescribe, 1},
	{"DescribeExec", pgx.QueryExecModeDescribeExec, 2},
	{"Exec", pgx.QueryExecModeExec, 1},
	{"SimpleProtocol", pgx.QueryExecModeSimpleProtocol, 1},
}

// TestRoundTrips proves through a counting proxy what each lock call
// costs on the wire, in every query exec mode of pgx: one round trip for
// a try, an uncontended wait and an unlock, whatever the key, except
// under describe_exec, which costs two for every statement with
// arguments. Each case runs twice, with a key not used before: the first
// run may prepare its statement (one round trip more), the second must
// cost exactly its count.
func TestRoundTrips(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, _ *sql.DB) {
		ctx := context.Background()
		// A session of its own, not through the proxy, holds a key of
		// each kind.
		holder := connect(t, s.DSN)
		busyKeys := make(map[string]advisory.Key)
		for _, kind := range keyKinds {
			busyKeys[kind.name] = kind.fresh()
			if err := pgxlock.Lock(ctx, holder, busyKeys[kind.name]); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range execModes {
			t.Run(m.name, func(t *testing.T) {
				p := s.Proxy(t)
				cfg, err := pgx.ParseConfig(p.DSN())
				if err != nil {
					t.Fatal(err)
				}
				cfg.DefaultQueryExecMode = m.mode
				conn, err := pgx.ConnectConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				// Warm up: the lock calls have identified the server's
				// engine on this connection.
				if ok, err := pgxlock.TryLock(ctx, conn, randomKey()); err != nil || !ok {
					t.Fatalf("warm-up TryLock = %v, %v", ok, err)
				}
				if err := pgxlock.UnlockAll(ctx, conn); err != nil {
					t.Fatal(err)
				}
				tryOK := func(want bool) func(bool, error) error {
					return func(ok bool, err error) error {
						if err == nil && ok != want {
							err = errors.New("try reported the wrong outcome")
						}
						return err
					}
				}
				lock := func(t *testing.T, k advisory.Key, shared bool) {
					t.Helper()
					f := pgxlock.Lock[*pgx.Conn]
					if shared {
						f = pgxlock.LockShared[*pgx.Conn]
					}
					if err := f(ctx, conn, k); err != nil {
						t.Fatal(err)
					}
				}
				// Each case runs on a bigint key and on a pair, each a
				// statement text of its own.
				var fresh func() advisory.Key
				var busy advisory.Key
				session := []struct {
					name string
					want int64
					// setup runs unmeasured and returns the measured call.
					setup func(t *testing.T) func() error
				}{
					{"TryLock", m.argTrips, func(t *testing.T) func() error {
						k := fresh()
						return func() error { return tryOK(true)(pgxlock.TryLock(ctx, conn, k)) }
					}},
					{"TryLockBusy", m.argTrips, func(t *testing.T) func() error {
						return func() error { return tryOK(false)(pgxlock.TryLock(ctx, conn, busy)) }
					}},
					{"TryLockShared", m.argTrips, func(t *testing.T) func() error {
						k := fresh()
						return func() error { return tryOK(true)(pgxlock.TryLockShared(ctx, conn, k)) }
					}},
					{"Lock", m.argTrips, func(t *testing.T) func() error {
						k := fresh()
						return func() error { return pgxlock.Lock(ctx, conn, k) }
					}},
					{"LockShared", m.argTrips, func(t *testing.T) func() error {
						k := fresh()
						return func() error { return pgxlock.LockShared(ctx, conn, k) }
					}},
					{"Unlock", m.argTrips, func(t *testing.T) func() error {
						k := fresh()
						lock(t, k, false)
						return func() error { return pgxlock.Unlock(ctx, conn, k) }
					}},
					{"UnlockShared", m.argTrips, func(t *testing.T) func() error {
						k := fresh()
						lock(t, k, true)
						return func() error { return pgxlock.UnlockShared(ctx, conn, k) }
					}},
					// No arguments: pgx sends it through the simple protocol
					// in every mode.
					{"UnlockAll", 1, func(t *testing.T) func() error {
						lock(t, fresh(), false)
						lock(t, fresh(), true)
						return func() error { return pgxlock.UnlockAll(ctx, conn) }
					}},
				}
				for _, tt := range session {
					for _, kind := range keyKinds {
						t.Run(tt.name+kind.name, func(t *testing.T) {
							fresh, busy = kind.fresh, busyKeys[kind.name]
							measure(t, p, tt.want, func() func() error { return tt.setup(t) })
							if err := pgxlock.UnlockAll(ctx, conn); err != nil {
								t.Fatal(err)
							}
						})
					}
				}

				xact := []struct {
					name string
					want int64
					call func(tx pgx.Tx) error
				}{
					{"TryXactLock", m.argTrips, func(tx pgx.Tx) error { return tryOK(true)(pgxlock.TryXactLock(ctx, tx, fresh())) }},
					{"TryXactLockBusy", m.argTrips, func(tx pgx.Tx) error { return tryOK(false)(pgxlock.TryXactLock(ctx, tx, busy)) }},
					{"TryXactLockShared", m.argTrips, func(tx pgx.Tx) error {
						return tryOK(true)(pgxlock.TryXactLockShared(ctx, tx, fresh()))
					}},
					{"XactLock", m.argTrips, func(tx pgx.Tx) error { return pgxlock.XactLock(ctx, tx, fresh()) }},
					{"XactLockShared", m.argTrips, func(tx pgx.Tx) error { return pgxlock.XactLockShared(ctx, tx, fresh()) }},
				}
				for _, tt := range xact {
					for _, kind := range keyKinds {
						t.Run(tt.name+kind.name, func(t *testing.T) {
							fresh, busy = kind.fresh, busyKeys[kind.name]
							tx, err := conn.Begin(ctx)
							if err != nil {
								t.Fatal(err)
							}
							defer tx.Rollback(ctx)
							measure(t, p, tt.want, func() func() error { return func() error { return tt.call(tx) } })
						})
					}
				}

				// The scope on a pool of one connection: BEGIN, the
				// lock, COMMIT. pgxpool pings a connection idle for more
				// than a second when it hands it out; this pool does not,
				// so that the count does not depend on the machine's
				// speed.
				t.Run("WithXactLock", func(t *testing.T) {
					pcfg, err := pgxpool.ParseConfig(p.DSN())
					if err != nil {
						t.Fatal(err)
					}
					pcfg.ConnConfig.DefaultQueryExecMode = m.mode
					pcfg.MaxConns = 1
					pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
					pool, err := pgxpool.NewWithConfig(ctx, pcfg)
					if err != nil {
						t.Fatal(err)
					}
					defer pool.Close()
					fn := func(context.Context, pgx.Tx) error { return nil }
					if err := pgxlock.WithXactLock(ctx, pool, randomKey(), fn); err != nil { // warm up
						t.Fatal(err)
					}
					for _, kind := range keyKinds {
						measure(t, p, m.argTrips+2, func() func() error {
							k := kind.fresh()
							return func() error { return pgxlock.WithXactLock(ctx, pool, k, fn) }
						})
					}
				})

				// The scope on a transaction the caller began: the lock,
				// then COMMIT, which has no arguments.
				t.Run("WithXactLockTx", func(t *testing.T) {
					measure(t, p, m.argTrips+1, func() func() error {
						tx, err := conn.Begin(ctx)
						if err != nil {
							t.Fatal(err)
						}
						k := randomKey()
						return func() error {
							return pgxlock.WithXactLockTx(ctx, tx, k, func(context.Context, pgx.Tx) error { return nil })
						}
					})
				})
			})
		}
	})
}

// keyKinds hand out fresh keys of each kind, bigint and pair.
var keyKinds = []struct {
	name  string
	fresh func() advisory.Key
}{
	{"", func() advisory.Key { return advisory.Int64Key(mrand.Int64N(1<<60) + 1) }},
	{"Pair", func() advisory.Key { return advisory.PairKey(mrand.Int32N(1<<30)+1, mrand.Int32N(1<<30)+1) }},
}

// measure counts the round trips of the call setup returns, twice: the
// first run may prepare a statement, the second must not.
func measure(t *testing.T, p *pgtest.Proxy, want int64, setup func() func() error) {
	t.Helper()
	for run := range 2 {
		f := setup()
		p.Reset()
		err := f()
		got := p.Flights()
		if err != nil {
			t.Fatal(err)
		}
		if run == 0 && (got < want || got > want+1) {
			t.Errorf("first run: %d round trips; want %d, or %d with a prepare", got, want, want+1)
		}
		if run == 1 && got != want {
			t.Errorf("%d round trips; want %d", got, want)
		}
	}
}

// TestPreparedOncePerConnection checks that the lock calls' statements
// are the same text for every key: after many keys, pg_prepared_statements
// of the connection (in pgx's default mode, which prepares each text it
// sends with arguments) holds one statement per kind of call and key,
// exactly as many as after a few.
func TestPreparedOncePerConnection(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, _ *sql.DB) {
		ctx := context.Background()
		conn := connect(t, s.DSN)
		calls := func(n int) {
			for i := range n {
				k := advisory.Int64Key(int64(i) + 1)
				if i%2 == 1 {
					k = advisory.PairKey(int32(i), int32(i))
				}
				if ok, err := pgxlock.TryLock(ctx, conn, k); err != nil || !ok {
					t.Fatalf("TryLock(%v) = %v, %v", k, ok, err)
				}
				if err := pgxlock.Unlock(ctx, conn, k); err != nil {
					t.Fatal(err)
				}
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ok, err := pgxlock.TryXactLock(ctx, tx, k); err != nil || !ok {
					t.Fatalf("TryXactLock(%v) = %v, %v", k, ok, err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The lock statements are those with parameters (the engine's
		// probe has none). The count itself goes through the simple
		// protocol, which prepares nothing.
		const prepared = "SELECT count(*), count(DISTINCT statement) FROM pg_catalog.pg_prepared_statements WHERE statement LIKE '%advisory%' AND statement LIKE '%$1%'"
		count := func() (n, distinct int) {
			if err := conn.QueryRow(ctx, prepared, pgx.QueryExecModeSimpleProtocol).Scan(&n, &distinct); err != nil {
				t.Fatal(err)
			}
			return n, distinct
		}
		calls(4)
		few, _ := count()
		calls(300)
		many, distinct := count()
		// A try, an unlock and a transaction's try, each for a bigint
		// and for a pair.
		if few != 6 || many != 6 || distinct != 6 {
			t.Fatalf("prepared lock statements after 4 keys: %d; after 300 more: %d (%d distinct); want 6, 6, 6", few, many, distinct)
		}
	})
}
