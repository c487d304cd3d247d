package idempotency

import (
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// DefaultTable is the processed-operations table that [Run], [Setup] and
// [Purge] use when no [Table] option names another. It is in schema
// pgadvisory, which holds the library's own objects whatever the
// session's search_path; creating the table creates the schema when it is
// missing, which needs CREATE on the database.
const DefaultTable = "pgadvisory.idempotency"

// legacyTable is the processed-operations table of releases before
// [DefaultTable], which they created in the first schema of the caller's
// search_path.
const legacyTable = "pgadvisory_idempotency"

// DefaultNamespace is the first half of the lock key of every operation
// when no [Namespace] option names another: operation k is locked on
// advisory.NameKey(DefaultNamespace, k). It is one of the IDs that
// package keyspace reserves for this library (keyspace.ReservedMinID + 3),
// so no registered namespace can collide with it.
const DefaultNamespace int32 = math.MinInt32 + 3

// An Option changes how [Run], [Setup] and [Purge] alike work: [Table]
// is one. Every Option is also a [RunOption].
type Option interface {
	RunOption
	sharedOption()
}

// A RunOption changes how [Run] works: an [Option], or one of the options
// of Run alone, [Namespace], [Wait], [TxOptions] and [NoCreate], which
// Setup and Purge do not accept.
type RunOption interface {
	apply(*options)
	runOption()
}

// The concrete options, one type per set of calls an option applies to.
type (
	option    func(*options) // Run, Setup and Purge
	runOption func(*options) // Run only
)

func (f option) apply(o *options) { f(o) }
func (option) sharedOption()      {}
func (option) runOption()         {}

func (f runOption) apply(o *options) { f(o) }
func (runOption) runOption()         {}

// options holds what the options of one call set.
type options struct {
	table     string
	ns        int32
	wait      time.Duration
	txOptions *sql.TxOptions
	noCreate  bool
}

// Table makes the call use the table name, "table" or "schema.table",
// instead of [DefaultTable]. Each part must be an identifier of letters,
// digits, underscores and dollar signs, not starting with a digit, of at
// most 63 bytes; anything else is an error matching [ErrBadOption]. The
// name is quoted as written, so "Ops" and "ops" are two tables; prefer
// lower case. A name without a schema resolves through the session's
// search_path: name the schema unless every caller has the same one.
func Table(name string) Option { return option(func(o *options) { o.table = name }) }

// Namespace makes [Run] lock operation k on advisory.NameKey(id, k)
// instead of advisory.NameKey([DefaultNamespace], k). Use it to give one
// service's operations a namespace of its own, registered with package
// keyspace.
func Namespace(id int32) RunOption { return runOption(func(o *options) { o.ns = id }) }

// Wait makes [Run] wait up to d for an operation that another transaction
// is running, instead of reporting [InProgress] at once. The server
// enforces the bound (advisory.Wait). When the other run commits within
// d, Run reports [Done] with its result; when it rolls back, Run runs fn
// itself; when d runs out, Run reports InProgress. Wait(0) does not wait,
// which is the default. Of several Wait options, the last one counts. A d
// that is negative or longer than the server's limit of math.MaxInt32
// milliseconds is an error matching [ErrBadOption].
func Wait(d time.Duration) RunOption { return runOption(func(o *options) { o.wait = d }) }

// TxOptions sets the isolation level and read-only flag of the
// transaction [Run] begins. nil keeps the database's defaults. READ
// COMMITTED, PostgreSQL's default, is the level Run is designed for: see
// the package documentation's Isolation section.
func TxOptions(opts *sql.TxOptions) RunOption {
	return runOption(func(o *options) { o.txOptions = opts })
}

// NoCreate stops [Run] from creating the table when it is missing: a
// missing table is then an error, as for a role without the CREATE
// privilege, whose table a migration made with [Setup].
func NoCreate() RunOption { return runOption(func(o *options) { o.noCreate = true }) }

// parse applies opts, in order, over the defaults, skipping nil options,
// and checks the result. It returns the options and the quoted table
// name.
func parse[O RunOption](opts []O) (options, string, error) {
	o := options{table: DefaultTable, ns: DefaultNamespace}
	for _, opt := range opts {
		if any(opt) != nil {
			opt.apply(&o)
		}
	}
	if o.wait < 0 || o.wait > math.MaxInt32*time.Millisecond {
		return o, "", fmt.Errorf("%w: Wait(%v): want 0 to %d ms", ErrBadOption, o.wait, math.MaxInt32)
	}
	table, err := quoteTable(o.table)
	return o, table, err
}

// lockOptions returns the options WithXactLock takes the operation's lock
// with.
func (o *options) lockOptions() []advisory.XactOption {
	opts := []advisory.XactOption{advisory.Wait(o.wait)}
	if o.txOptions != nil {
		opts = append(opts, advisory.TxOptions(o.txOptions))
	}
	return opts
}
