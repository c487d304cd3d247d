package migratelock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// A Driver is a migrate database.Driver that runs another driver's
// migrations under a pgadvisory lease instead of that driver's own lock.
// [Driver.Lock] and [Driver.Unlock] take and release the lease; Run,
// SetVersion, Version and Drop go to the wrapped driver, and Run and
// SetVersion are refused once the lease of the current Lock is lost.
// Make one with [WithInstance] and give it to
// migrate.NewWithDatabaseInstance or migrate.NewWithInstance.
type Driver struct {
	database.Driver // the wrapped driver

	db  *sql.DB
	cfg Config

	mu      sync.Mutex
	locking chan struct{} // closed when the Lock in flight returns; nil when none is
	lease   *advisory.Lease
}

var _ database.Driver = (*Driver)(nil)

// WithInstance returns a Driver that wraps inner, such as migrate's
// postgres driver from postgres.WithInstance, and takes its lease on a
// connection of its own from db, a pool on the database inner migrates.
// inner's own Lock and Unlock are never called; a driver may still lock
// by itself (the postgres driver does, once, in its WithInstance, to
// create its table). An out-of-range config is an error matching
// advisory.ErrBadOption.
func WithInstance(inner database.Driver, db *sql.DB, config *Config) (*Driver, error) {
	switch {
	case inner == nil:
		return nil, errors.New("migratelock: nil database.Driver")
	case db == nil:
		return nil, errors.New("migratelock: nil *sql.DB")
	case config == nil:
		return nil, errors.New("migratelock: nil *Config")
	}
	cfg, err := config.check()
	if err != nil {
		return nil, err
	}
	return &Driver{Driver: inner, db: db, cfg: cfg}, nil
}

// Open is not supported: a Driver wraps a driver given to
// [WithInstance].
func (d *Driver) Open(string) (database.Driver, error) {
	return nil, errors.New("migratelock: Open is not supported: wrap a driver with migratelock.WithInstance")
}

// Lock takes an exclusive session lock on the config's key on a
// connection of its own and holds it as a lease until [Driver.Unlock] or
// a loss. It waits for a busy key in slices that hold no snapshot, for at
// most [Config.LockTimeout]; then it returns an error matching both
// database.ErrLocked and advisory.ErrLockTimeout, holding nothing. It
// returns within LockTimeout plus two seconds to connect and confirm the
// lease, on a server that stops answering too. A Lock while this Driver
// holds the lease, or takes it, returns database.ErrLocked at once, as
// migrate's postgres driver does. On any error nothing is held, and a
// session in doubt has been closed.
func (d *Driver) Lock() error {
	d.mu.Lock()
	if d.locking != nil || d.lease != nil {
		d.mu.Unlock()
		return fmt.Errorf("migratelock: lock %v: this driver already holds or takes it: %w", d.cfg.Key, database.ErrLocked)
	}
	locking := make(chan struct{})
	d.locking = locking
	d.mu.Unlock()
	defer close(locking)

	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.LockTimeout+lockSlack)
	defer cancel()
	opts := []advisory.LeaseOption{advisory.Wait(d.cfg.LockTimeout)}
	if d.cfg.Heartbeat > 0 {
		opts = append(opts, advisory.Heartbeat(d.cfg.Heartbeat))
	}
	lease, err := advisory.Acquire(ctx, d.db, d.cfg.Key, opts...)

	d.mu.Lock()
	defer d.mu.Unlock()
	d.locking = nil
	switch {
	case errors.Is(err, advisory.ErrLockTimeout), errors.Is(err, advisory.ErrNotAcquired):
		return fmt.Errorf("migratelock: lock %v: another session held it for longer than the lock timeout (%v): %w: %w", d.cfg.Key, d.cfg.LockTimeout, database.ErrLocked, err)
	case err != nil:
		return fmt.Errorf("migratelock: lock %v: %w", d.cfg.Key, err)
	}
	d.lease = lease
	if onLoss := d.cfg.OnLoss; onLoss != nil {
		context.AfterFunc(lease.Context(), func() {
			// The lease's context ends on a loss and on Release; only a
			// loss leaves Err matching ErrLockLost.
			if err := lease.Err(); errors.Is(err, advisory.ErrLockLost) {
				onLoss(fmt.Errorf("migratelock: lock %v: %w", d.cfg.Key, err))
			}
		})
	}
	return nil
}

// Unlock releases the lease [Driver.Lock] took and returns its
// connection to the pool. It returns database.ErrNotLocked when the
// Driver holds no lease, and an error matching advisory.ErrLockLost when
// the lease was lost before it, whose session has then been closed,
// never pooled. It gives up after ten seconds (plus advisory.AbortMargin)
// on a server that stops answering.
func (d *Driver) Unlock() error {
	d.mu.Lock()
	lease := d.lease
	d.lease = nil
	d.mu.Unlock()
	if lease == nil {
		return fmt.Errorf("migratelock: unlock %v: %w", d.cfg.Key, database.ErrNotLocked)
	}
	if err := lease.Release(context.Background()); err != nil {
		return fmt.Errorf("migratelock: unlock %v: %w", d.cfg.Key, err)
	}
	return nil
}

// Run runs migration on the wrapped driver, unless the lease of the
// current Lock has been lost: it then returns an error matching
// advisory.ErrLockLost and runs nothing. A loss while the wrapped driver
// runs the migration is not seen until the next call: migrate gives the
// driver no context to cancel.
func (d *Driver) Run(migration io.Reader) error {
	if err := d.held("run the migration"); err != nil {
		return err
	}
	return d.Driver.Run(migration)
}

// SetVersion records version and dirty on the wrapped driver, unless the
// lease of the current Lock has been lost: it then returns an error
// matching advisory.ErrLockLost and records nothing. migrate marks a
// version dirty before it runs its migration and clean after, so a
// migration during which the lease was lost stays dirty, for a person to
// check and then force.
func (d *Driver) SetVersion(version int, dirty bool) error {
	if err := d.held(fmt.Sprintf("set version %d", version)); err != nil {
		return err
	}
	return d.Driver.SetVersion(version, dirty)
}

// Close releases a lease still held, as one a Lock took after migrate
// had stopped waiting for it, waiting first for a Lock in flight, then
// closes the wrapped driver.
func (d *Driver) Close() error {
	d.mu.Lock()
	locking := d.locking
	d.mu.Unlock()
	if locking != nil {
		<-locking
	}
	d.mu.Lock()
	lease := d.lease
	d.lease = nil
	d.mu.Unlock()
	var relErr error
	if lease != nil {
		if err := lease.Release(context.Background()); err != nil {
			relErr = fmt.Errorf("migratelock: close: release %v: %w", d.cfg.Key, err)
		}
	}
	return errors.Join(relErr, d.Driver.Close())
}

// held returns an error matching advisory.ErrLockLost when the lease of
// the current Lock has been lost, and nil otherwise, also when the Driver
// holds no lease: migrate locks before every call that changes the
// database, and database/testing calls the driver unlocked.
func (d *Driver) held(what string) error {
	d.mu.Lock()
	lease := d.lease
	d.mu.Unlock()
	if lease == nil {
		return nil
	}
	if err := lease.Err(); err != nil {
		return fmt.Errorf("migratelock: refused to %s: the lock was lost, so it would run without it: %w", what, err)
	}
	return nil
}
