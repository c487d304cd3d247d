package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"testing"
)

// The forms of SQL by hand that the lock benchmarks set beside the
// library, and the seeded order in which the interleaved ones run.

// A handForm is one way to write a lock call by hand: through
// ExecContext, reading the answer from RowsAffected, or through
// QueryRowContext, scanning it; as "SELECT 1 WHERE f(k)", whose rows are
// the answer, or as "SELECT f(k)", whose value is; the key in the text or
// as a parameter. ExecContext with the plain SELECT has no answer to
// read, which a try needs, so it is not among them.
type handForm struct {
	name  string // "exec-where-inline", ...
	query bool   // QueryRowContext, else ExecContext
	where bool   // SELECT 1 WHERE f(k), else SELECT f(k)
	param bool   // f($1), else f(42)
}

// handForms are every form of [handForm].
var handForms = []handForm{
	{"exec-where-inline", false, true, false},
	{"exec-where-param", false, true, true},
	{"query-select-inline", true, false, false},
	{"query-select-param", true, false, true},
	{"query-where-inline", true, true, false},
	{"query-where-param", true, true, true},
}

// benchDB is what *sql.Conn and *sql.Tx have in common.
type benchDB interface {
	benchExecer
	benchQueryer
}

var (
	_ benchDB = (*sql.Conn)(nil)
	_ benchDB = (*sql.Tx)(nil)
)

// call sends fn(k), a boolean function of PostgreSQL's such as
// "pg_try_advisory_lock", in form f on q, and requires it to answer true.
func (f handForm) call(ctx context.Context, q benchDB, fn string, k int64) error {
	var args []any
	text := "pg_catalog." + fn + "($1)"
	if f.param {
		args = []any{k}
	} else {
		text = "pg_catalog." + fn + "(" + strconv.FormatInt(k, 10) + ")"
	}
	switch {
	case !f.query:
		return execOne(ctx, q, "SELECT 1 WHERE "+text, args...)
	case f.where:
		var one int
		err := q.QueryRowContext(ctx, "SELECT 1 WHERE "+text, args...).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s(%d): false", fn, k)
		}
		return err
	}
	return queryBool(ctx, q, "SELECT "+text, args...)
}

// reportBest reports, for every variant that is not by hand, its mean
// time over that of the fastest variant by hand of its group, as
// "<name>/best". times are the variants' mean times per call.
func reportBest(b *testing.B, names, groups []string, hand []bool, times []float64) {
	for i := range names {
		if hand[i] || groups[i] == "" {
			continue
		}
		best := 0.0
		for j := range names {
			if hand[j] && groups[j] == groups[i] && (best == 0 || times[j] < best) {
				best = times[j]
			}
		}
		if best > 0 {
			b.ReportMetric(times[i]/best, names[i]+"/best")
		}
	}
}
