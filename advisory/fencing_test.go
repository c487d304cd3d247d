package advisory

import (
	"context"
	"errors"
	"math"
	"regexp"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// serverError is a driver's error with a SQLSTATE.
type serverError string

func (e serverError) Error() string    { return "driver: permission denied (SQLSTATE " + string(e) + ")" }
func (e serverError) SQLState() string { return string(e) }

// spentError is the server's error when a fencing token no longer fits
// its layout.
type spentError struct{}

func (spentError) Error() string    { return "driver: " + tokensSpent + " (SQLSTATE 22P02)" }
func (spentError) SQLState() string { return badInput }

// privileges is one answer of sqltext.FencingPrivileges.
type privileges struct {
	dbCreate, schema, schemaUsage, schemaCreate, seq, seqUsage bool
}

// TestExplainFencing checks the privilege that the error of a fenced
// acquisition names, by what the server says the role lacks.
func TestExplainFencing(t *testing.T) {
	t.Parallel()
	const lease = "advisory: lease 42: "
	const driverErr = ": driver: permission denied (SQLSTATE 42501)"
	tests := []struct {
		name    string
		op      string
		code    string
		fencing bool
		noDB    bool
		spent   bool        // the server's message says the token does not fit
		ask     *privileges // nil: the question fails
		want    string
	}{
		{name: "CannotCreateSchema", op: "lease", code: "42501", fencing: true, ask: &privileges{},
			want: lease + "fencing: the role cannot create schema pgadvisory: it needs CREATE on the database, " +
				"or an administrator can run: CREATE SCHEMA pgadvisory; CREATE SEQUENCE pgadvisory.fencing_token; " +
				"GRANT USAGE ON SCHEMA pgadvisory TO alice; GRANT USAGE ON SEQUENCE pgadvisory.fencing_token TO alice" + driverErr},
		{name: "NoSchemaUsage", op: "lease", code: "42501", fencing: true,
			ask:  &privileges{dbCreate: true, schema: true, seq: true},
			want: lease + "fencing: the role lacks USAGE on schema pgadvisory: an administrator can run: GRANT USAGE ON SCHEMA pgadvisory TO alice" + driverErr},
		{name: "CannotCreateSequence", op: "lease", code: "42501", fencing: true,
			ask: &privileges{schema: true, schemaUsage: true, schemaCreate: true},
			want: lease + "fencing: the role cannot create sequence pgadvisory.fencing_token: it needs CREATE on the database, " +
				"or an administrator can run: CREATE SEQUENCE pgadvisory.fencing_token; GRANT USAGE ON SEQUENCE pgadvisory.fencing_token TO alice" + driverErr},
		{name: "CannotCreateInSchema", op: "lease", code: "42501", fencing: true,
			ask: &privileges{dbCreate: true, schema: true, schemaUsage: true},
			want: lease + "fencing: the role cannot create sequence pgadvisory.fencing_token: it needs CREATE on schema pgadvisory, " +
				"or an administrator can run: CREATE SEQUENCE pgadvisory.fencing_token; GRANT USAGE ON SEQUENCE pgadvisory.fencing_token TO alice" + driverErr},
		{name: "NoSequenceUsage", op: "try lock", code: "42501", fencing: true,
			ask: &privileges{schema: true, schemaUsage: true, seq: true},
			want: "advisory: try lock 42: fencing: the role lacks USAGE on sequence pgadvisory.fencing_token: an administrator can run: " +
				"GRANT USAGE ON SEQUENCE pgadvisory.fencing_token TO alice" + driverErr},
		{name: "NothingMissing", op: "lease", code: "42501", fencing: true,
			ask:  &privileges{dbCreate: true, schema: true, schemaUsage: true, schemaCreate: true, seq: true, seqUsage: true},
			want: lease + "driver: permission denied (SQLSTATE 42501)"},
		{name: "QuestionFails", op: "lease", code: "42501", fencing: true,
			want: lease + "driver: permission denied (SQLSTATE 42501)"},
		{name: "NoDB", op: "lease", code: "42501", fencing: true, noDB: true,
			want: lease + "fencing: " + fencingPrivilegesNeeded + driverErr},
		{name: "NoDBNotTheStart", op: "lock", code: "42501", fencing: true, noDB: true,
			want: "advisory: lock 42: driver: permission denied (SQLSTATE 42501)"},
		{name: "WithoutFencing", op: "lease", code: "42501", noDB: true,
			want: lease + "driver: permission denied (SQLSTATE 42501)"},
		{name: "OtherError", op: "lease", code: "42P01", fencing: true, noDB: true,
			want: lease + "driver: permission denied (SQLSTATE 42P01)"},
		{name: "TokensSpent", op: "try lock", code: "22P02", fencing: true, spent: true,
			want: "advisory: try lock 42: fencing: " + tokensSpentWhy + ": driver: " + tokensSpent + " (SQLSTATE 22P02)"},
		{name: "OtherBadInput", op: "lease", code: "22P02", fencing: true, noDB: true,
			want: lease + "driver: permission denied (SQLSTATE 22P02)"},
		{name: "TokensSpentWithoutFencing", op: "lease", code: "22P02", spent: true, noDB: true,
			want: lease + "driver: " + tokensSpent + " (SQLSTATE 22P02)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m, err := sqlmock.New()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			q := m.ExpectQuery(regexp.QuoteMeta(sqltext.FencingPrivileges))
			if p := tt.ask; p != nil {
				q.WillReturnRows(sqlmock.NewRows([]string{"role", "db", "schema", "usage", "create", "seq", "seq_usage"}).
					AddRow("alice", p.dbCreate, p.schema, p.schemaUsage, p.schemaCreate, p.seq, p.seqUsage))
			} else {
				q.WillReturnError(errors.New("connection reset"))
			}
			asked := db
			if tt.noDB {
				asked = nil
			}
			var cause error = serverError(tt.code)
			if tt.spent {
				cause = spentError{}
			}
			got := explainFencing(context.Background(), asked, &scope.Options{Fencing: tt.fencing},
				&scope.OpError{Op: tt.op, Keys: "42", Err: cause})
			if got.Error() != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			if !errors.Is(got, cause) {
				t.Errorf("the driver's error is not reachable from %v", got)
			}
			asks := !tt.noDB && tt.fencing && tt.code == "42501"
			if err := m.ExpectationsWereMet(); asks && err != nil {
				t.Errorf("the privileges were not asked: %v", err)
			}
		})
	}
}

// TestSplitToken checks the layout of a fencing token: the timeline above
// bit 40, the counter below.
func TestSplitToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		token             int64
		timeline, counter int64
	}{
		{"NoToken", 0, 0, 0},
		{"EarlierRelease", 10501, 0, 10501},
		{"EarlierReleaseLast", 1<<40 - 1, 0, 1<<40 - 1},
		{"FirstOfTimeline1", 1<<40 | 1, 1, 1},
		{"Timeline2", 2<<40 | 34, 2, 34},
		{"LastCounter", 7<<40 | (1<<40 - 1), 7, 1<<40 - 1},
		{"Greatest", math.MaxInt64, 1<<23 - 1, 1<<40 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tl, c := SplitToken(tt.token)
			if tl != tt.timeline || c != tt.counter {
				t.Errorf("SplitToken(%d) = %d, %d; want %d, %d", tt.token, tl, c, tt.timeline, tt.counter)
			}
			if back := tl<<tokenCounterBits | c; back != tt.token {
				t.Errorf("timeline<<40 | counter = %d; want %d", back, tt.token)
			}
		})
	}
}
