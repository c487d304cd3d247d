package main

import (
	"errors"
	"fmt"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// explainPooler returns err as the pooler error when it is one that only a
// transaction pooler explains: a prepared statement that pgx made on one
// backend met, under the same name, on another (SQLSTATE 42P05,
// `prepared statement "stmtcache_…" already exists`), or not found on the
// backend it was made on (26000). Behind PgBouncer in transaction mode,
// each statement may run on another backend, so pgx's statement cache
// fails before any lock is taken; the command says what is in the way, as
// it does when the lease finds its session shared
// ([advisory.ErrSharedSession]). Any other error is returned as it is.
func explainPooler(err error) error {
	if errors.Is(err, advisory.ErrSharedSession) {
		return err
	}
	var e interface{ SQLState() string }
	if !errors.As(err, &e) || e.SQLState() != "42P05" && e.SQLState() != "26000" {
		return err
	}
	return fmt.Errorf("%w (the server answered: %w); connect to PostgreSQL directly, or through a pooler in session mode",
		advisory.ErrSharedSession, err)
}
