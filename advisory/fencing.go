package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// tokenCounterBits is the width of a fencing token's counter, below its
// timeline (see [SplitToken]).
const tokenCounterBits = 40

// SplitToken returns the two parts of a fencing token from [Lease.Token]:
// the timeline of the server that handed it out, and the counter drawn
// from the sequence pgadvisory.fencing_token. A token is
//
//	timeline<<40 | counter
//
// an int64 that is never negative. PostgreSQL's timeline grows by one at
// every promotion of a standby, so tokens compare by timeline first: every
// token a promoted standby hands out is greater than every token of the
// primary it replaced, even those whose WAL it never received. Within a
// timeline the counter grows with every token drawn on the database, up to
// 2^40-1; the draw after that fails rather than wrap. A token of an
// earlier release, the counter alone, has timeline 0; one of 0, which
// [Lease.Token] returns without [Fencing], splits into 0 and 0.
//
// Resources compare tokens as whole numbers; SplitToken is for logs and
// for telling a failover from a new holder.
func SplitToken(token int64) (timeline, counter int64) {
	return token >> tokenCounterBits, token & (1<<tokenCounterBits - 1)
}

// privilegeDenied is the SQLSTATE of a privilege the role lacks.
const privilegeDenied = "42501"

// tokensSpent is what the server says when the counter or the timeline
// no longer fits a token (see sqltext's nextToken), in an error of
// SQLSTATE badInput.
const (
	tokensSpent = "does not fit a fencing token"
	badInput    = "22P02"
)

// tokensSpentWhy says what a failure to fit a token means.
const tokensSpentWhy = "no fencing token is left on this database: the counter of sequence " + sqltext.FencingSequence +
	" is past 2^40-1 (or the server's timeline past 2^23-1), and tokens never wrap"

// explainFencing returns err, the failure of an acquisition that o asked
// to take a fencing token, with the privilege said that the role lacks,
// when the server refused a privilege (SQLSTATE 42501). It asks db which
// one: CREATE on the database, to create the schema and the sequence the
// first time; USAGE on the schema; USAGE on the sequence. With a nil db, as
// for [Watch], it names them all. A token that no longer fits its layout
// (the counter is spent) is said so. The driver's error stays reachable.
// Any other error, or a refusal db finds no fencing privilege missing for,
// comes back as it is.
func explainFencing(ctx context.Context, db *sql.DB, o *scope.Options, err error) error {
	if !o.Fencing {
		return err
	}
	var why string
	switch code := scope.SQLState(err); {
	case code == badInput && strings.Contains(err.Error(), tokensSpent):
		why = tokensSpentWhy
	case code != privilegeDenied:
		return err
	case db == nil:
		// The lease's start is the statement that draws the token;
		// nothing else in it needs a privilege.
		var op *scope.OpError
		if errors.As(err, &op) && op.Op == "lease" {
			why = fencingPrivilegesNeeded
		}
	default:
		why = missingFencingPrivilege(ctx, db)
	}
	if why == "" {
		return err
	}
	kind := errors.New("advisory: fencing: " + why)
	if op, ok := err.(*scope.OpError); ok && op.Kind == nil {
		e := *op
		e.Kind = kind
		return &e
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// fencingPrivilegesNeeded names every privilege fencing tokens need, for
// when the one missing cannot be asked.
const fencingPrivilegesNeeded = "the role lacks a privilege that fencing tokens need: " +
	"CREATE on the database for the first token, which creates schema " + sqltext.Schema +
	" and sequence " + sqltext.FencingSequence + ", then USAGE on both; " +
	"an administrator can run: " + fencingSetup + "role; " + fencingGrantSequence + "role"

// The statements an administrator runs for a role that may not create
// the schema or the sequence, each but the last two to be followed by the
// role's name.
const (
	fencingSetup         = "CREATE SCHEMA " + sqltext.Schema + "; CREATE SEQUENCE " + sqltext.FencingSequence + "; " + fencingGrantSchema
	fencingGrantSchema   = "GRANT USAGE ON SCHEMA " + sqltext.Schema + " TO "
	fencingGrantSequence = "GRANT USAGE ON SEQUENCE " + sqltext.FencingSequence + " TO "
)

// missingFencingPrivilege asks db which privilege for fencing tokens the
// role lacks, and says it, with what an administrator can run instead;
// it returns "" when it finds none missing or cannot ask.
func missingFencingPrivilege(ctx context.Context, db *sql.DB) string {
	var role string
	var dbCreate, schema, schemaUsage, schemaCreate, seq, seqUsage bool
	err := db.QueryRowContext(ctx, sqltext.FencingPrivileges).
		Scan(&role, &dbCreate, &schema, &schemaUsage, &schemaCreate, &seq, &seqUsage)
	if err != nil {
		return ""
	}
	switch {
	case !schema && !dbCreate:
		return "the role cannot create schema " + sqltext.Schema + ": it needs CREATE on the database, " +
			"or an administrator can run: " + fencingSetup + role + "; " + fencingGrantSequence + role
	case schema && !schemaUsage:
		return "the role lacks USAGE on schema " + sqltext.Schema + ": an administrator can run: " + fencingGrantSchema + role
	case schema && !seq && (!dbCreate || !schemaCreate):
		// Creating the sequence runs CREATE SCHEMA IF NOT EXISTS, which
		// needs CREATE on the database even when the schema exists.
		need := "CREATE on the database"
		if dbCreate {
			need = "CREATE on schema " + sqltext.Schema
		}
		return "the role cannot create sequence " + sqltext.FencingSequence + ": it needs " + need +
			", or an administrator can run: CREATE SEQUENCE " + sqltext.FencingSequence + "; " + fencingGrantSequence + role
	case seq && !seqUsage:
		return "the role lacks USAGE on sequence " + sqltext.FencingSequence + ": an administrator can run: " + fencingGrantSequence + role
	}
	return ""
}
