package idempotency_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
)

// scale multiplies the operation counts of the exactly-once proofs:
// PGADVISORY_IDEMPOTENCY_SCALE=10 runs 1,000 operations instead of 100.
func scale(t *testing.T) int {
	t.Helper()
	v := os.Getenv("PGADVISORY_IDEMPOTENCY_SCALE")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("PGADVISORY_IDEMPOTENCY_SCALE=%q: want a positive integer", v)
	}
	return n
}

// tableName returns a table name no other test uses, with prefix, and
// drops the table at t's cleanup.
func tableName(t *testing.T, db *sql.DB, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := prefix + "_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return name
}
