package scope

import (
	"database/sql"
	"errors"
	"testing"
)

// TestBeginStatement: the BEGIN that an owned wait sends with each slice
// starts the next transaction as the scope's TxOptions say.
func TestBeginStatement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    *sql.TxOptions
		want    string
		wantErr error
	}{
		{name: "Nil", opts: nil, want: "BEGIN"},
		{name: "Default", opts: &sql.TxOptions{}, want: "BEGIN"},
		{name: "ReadOnly", opts: &sql.TxOptions{ReadOnly: true}, want: "BEGIN READ ONLY"},
		{name: "ReadCommitted", opts: &sql.TxOptions{Isolation: sql.LevelReadCommitted}, want: "BEGIN ISOLATION LEVEL READ COMMITTED"},
		{name: "Serializable", opts: &sql.TxOptions{Isolation: sql.LevelSerializable}, want: "BEGIN ISOLATION LEVEL SERIALIZABLE"},
		{name: "RepeatableReadReadOnly", opts: &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
			want: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"},
		{name: "Snapshot", opts: &sql.TxOptions{Isolation: sql.LevelSnapshot}, wantErr: ErrBadOption},
		{name: "Linearizable", opts: &sql.TxOptions{Isolation: sql.LevelLinearizable}, wantErr: ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := beginStatement(tt.opts)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("beginStatement = %q, %v; want an error matching %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("beginStatement = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
