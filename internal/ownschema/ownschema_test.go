package ownschema_test

import (
	"context"
	"errors"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/ownschema"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// serverError is a driver's error with a SQLSTATE.
type serverError string

func (e serverError) Error() string    { return "driver: SQLSTATE " + string(e) }
func (e serverError) SQLState() string { return string(e) }

func TestEnsure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		exists  bool
		create  error  // what CREATE SCHEMA returns
		end     string // the statement that ends the savepoint, "" for none
		wantErr string
	}{
		{name: "Exists", exists: true},
		{name: "Creates", end: "RELEASE SAVEPOINT pgadvisory_schema"},
		{name: "LosesRace", create: serverError("23505"), end: "ROLLBACK TO SAVEPOINT pgadvisory_schema"},
		{name: "LosesRaceLate", create: serverError("42P06"), end: "ROLLBACK TO SAVEPOINT pgadvisory_schema"},
		{name: "NoPrivilege", create: serverError("42501"),
			wantErr: "create schema pgadvisory, which needs CREATE on the database (or an administrator can run: " +
				"CREATE SCHEMA pgadvisory; GRANT USAGE, CREATE ON SCHEMA pgadvisory TO role): driver: SQLSTATE 42501"},
		{name: "Fails", create: errors.New("connection reset"), wantErr: "create schema pgadvisory: connection reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			m.ExpectBegin()
			m.ExpectQuery(sqltext.SchemaExists).WillReturnRows(sqlmock.NewRows([]string{"exists"}).AddRow(tt.exists))
			if !tt.exists {
				m.ExpectExec("SAVEPOINT pgadvisory_schema").WillReturnResult(sqlmock.NewResult(0, 0))
				create := m.ExpectExec(sqltext.CreateSchema)
				if tt.create != nil {
					create.WillReturnError(tt.create)
				} else {
					create.WillReturnResult(sqlmock.NewResult(0, 0))
				}
				if tt.end != "" {
					m.ExpectExec(tt.end).WillReturnResult(sqlmock.NewResult(0, 0))
				}
			}
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			err = ownschema.Ensure(context.Background(), tx)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Ensure: %v", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("Ensure = %v; want %s", err, tt.wantErr)
			}
			if tt.create != nil && tt.wantErr != "" && !errors.Is(err, tt.create) {
				t.Errorf("Ensure = %v; the driver's error is not reachable", err)
			}
			if err := m.ExpectationsWereMet(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestHolds(t *testing.T) {
	t.Parallel()
	for table, want := range map[string]bool{
		`"pgadvisory"."idempotency"`: true,
		`"pgadvisory"."ops"`:         true,
		`"pgadvisory_idempotency"`:   false,
		`"ops"."pgadvisory"`:         false,
		`"pgadvisory"`:               false,
	} {
		if got := ownschema.Holds(table); got != want {
			t.Errorf("Holds(%s) = %v; want %v", table, got, want)
		}
	}
}

func TestLegacyError(t *testing.T) {
	t.Parallel()
	err := ownschema.LegacyError("pgadvisory_idempotency", []string{"billing", "public"}, "pgadvisory.idempotency", "idempotency.Table")
	want := "pgadvisory_idempotency, the default table of an earlier release, exists (in schema billing, public) and " +
		"pgadvisory.idempotency does not: move it with CREATE SCHEMA IF NOT EXISTS pgadvisory; " +
		"ALTER TABLE billing.pgadvisory_idempotency SET SCHEMA pgadvisory; " +
		"ALTER TABLE pgadvisory.pgadvisory_idempotency RENAME TO idempotency; " +
		`or keep using it with idempotency.Table("billing.pgadvisory_idempotency")`
	if err.Error() != want {
		t.Errorf("\n got %s\nwant %s", err, want)
	}
}
