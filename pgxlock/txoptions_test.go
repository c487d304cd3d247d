package pgxlock

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pgadvisory/pgadvisory/advisory"
)

// TestPgxTxOptions checks how advisory.TxOptions's database/sql options
// become pgx's: every isolation level PostgreSQL has, the read-only flag,
// and an error for the levels it has not.
func TestPgxTxOptions(t *testing.T) {
	tests := []struct {
		name string
		in   *sql.TxOptions
		want pgx.TxOptions
		err  error
	}{
		{"Nil", nil, pgx.TxOptions{}, nil},
		{"Default", &sql.TxOptions{}, pgx.TxOptions{}, nil},
		{"ReadOnly", &sql.TxOptions{ReadOnly: true}, pgx.TxOptions{AccessMode: pgx.ReadOnly}, nil},
		{"ReadUncommitted", &sql.TxOptions{Isolation: sql.LevelReadUncommitted}, pgx.TxOptions{IsoLevel: pgx.ReadUncommitted}, nil},
		{"ReadCommitted", &sql.TxOptions{Isolation: sql.LevelReadCommitted}, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, nil},
		{"RepeatableRead", &sql.TxOptions{Isolation: sql.LevelRepeatableRead}, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, nil},
		{"SerializableReadOnly", &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true},
			pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly}, nil},
		{"Snapshot", &sql.TxOptions{Isolation: sql.LevelSnapshot}, pgx.TxOptions{}, advisory.ErrBadOption},
		{"WriteCommitted", &sql.TxOptions{Isolation: sql.LevelWriteCommitted}, pgx.TxOptions{}, advisory.ErrBadOption},
		{"Linearizable", &sql.TxOptions{Isolation: sql.LevelLinearizable}, pgx.TxOptions{}, advisory.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := pgxTxOptions(tt.in)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("pgxTxOptions(%+v) error = %v; want %v", tt.in, err, tt.err)
			}
			if err == nil && got != tt.want {
				t.Fatalf("pgxTxOptions(%+v) = %+v; want %+v", tt.in, got, tt.want)
			}
		})
	}
}
