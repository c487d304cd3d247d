package migratelock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// DefaultLockTimeout is how long [Driver.Lock] waits for a busy key when
// [Config.LockTimeout] is 0. It is below migrate's own
// migrate.DefaultLockTimeout (15 s), so that Lock gives up, holding
// nothing, before migrate stops waiting for it.
const DefaultLockTimeout = 10 * time.Second

// lockSlack is how much longer than its LockTimeout a Lock may take to
// connect and confirm the lease, beside the wait itself. A server that
// stops answering is given up after LockTimeout plus lockSlack (plus
// advisory.AbortMargin).
const lockSlack = 2 * time.Second

// A Config says which key [WithInstance]'s Driver takes and how. migrate's
// Lock and Unlock take no context, so the wait's bound is here.
type Config struct {
	// Key is the key the lease takes. Every instance that migrates one
	// database must use the same. [PostgresKey] gives the key migrate's
	// own postgres driver takes for a database, schema and table.
	Key advisory.Key

	// LockTimeout bounds [Driver.Lock]'s wait while another session holds
	// the key; Lock then returns an error matching database.ErrLocked and
	// advisory.ErrLockTimeout, holding nothing. 0 is
	// [DefaultLockTimeout]. Keep it below the Migrate's own LockTimeout
	// (migrate.DefaultLockTimeout, 15 s, unless set): migrate stops
	// waiting for a Lock after that, but cannot stop the Lock, which
	// then holds the lease unknown to migrate until [Driver.Close].
	LockTimeout time.Duration

	// Heartbeat is the interval of the lease's heartbeat, as for
	// advisory.Heartbeat: a loss is found within two intervals. 0 is
	// advisory's default of 5 seconds.
	Heartbeat time.Duration

	// OnLoss, if not nil, is called once, on a goroutine of its own,
	// when the lease of a Lock is lost, with an error matching
	// advisory.ErrLockLost. migrate has no context to cancel; a caller
	// can stop it at its next migration with
	// m.GracefulStop <- true from here.
	OnLoss func(err error)
}

// check fills in the defaults and refuses values out of range with an
// error matching advisory.ErrBadOption.
func (c Config) check() (Config, error) {
	switch {
	case c.LockTimeout < 0:
		return c, fmt.Errorf("migratelock: %w: Config.LockTimeout (%v) must not be negative", advisory.ErrBadOption, c.LockTimeout)
	case c.Heartbeat < 0 || (c.Heartbeat > 0 && c.Heartbeat < time.Millisecond):
		return c, fmt.Errorf("migratelock: %w: Config.Heartbeat (%v) must be 0 or at least a millisecond", advisory.ErrBadOption, c.Heartbeat)
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = DefaultLockTimeout
	}
	return c, nil
}

// PostgresKey returns the key migrate's postgres driver takes for the
// migrations table tableName in schemaName of databaseName, as
// database.GenerateAdvisoryLockId computes it: instances that run
// migrate's own lock and instances that run this package's then exclude
// each other while a fleet moves from one to the other. The postgres
// driver's defaults are the database's name, its current schema
// ("public") and "schema_migrations".
func PostgresKey(databaseName, schemaName, tableName string) advisory.Key {
	id, _ := database.GenerateAdvisoryLockId(databaseName, schemaName, tableName)
	v, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		// GenerateAdvisoryLockId prints a uint32.
		panic("migratelock: migrate's advisory lock id " + id + " is not a number: " + err.Error())
	}
	return advisory.Int64Key(v)
}
