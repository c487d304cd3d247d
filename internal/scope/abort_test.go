package scope

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/lib/pq"
)

// closer counts its closes.
type closer struct{ closes atomic.Int32 }

func (c *closer) Close() error { c.closes.Add(1); return nil }

// TestWatchdog shows when a watchdog closes the socket, in a bubble of
// testing/synctest, whose clock moves only when every goroutine waits:
// only when the context ends first and the statement has not returned
// within AbortMargin, and never after stop.
func TestWatchdog(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		deadline  time.Duration // of the context
		runs      time.Duration // how long the statement runs before stop
		wantClose int32
	}{
		{"ReturnsBeforeTheDeadline", time.Second, 500 * time.Millisecond, 0},
		{"ReturnsWithinTheMargin", time.Second, time.Second + AbortMargin/2, 0},
		{"OutlivesTheMargin", time.Second, time.Second + 2*AbortMargin, 1},
		{"NeverReturns", time.Second, time.Hour, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := &closer{}
				ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
				defer cancel()
				stop := watch(ctx, c)
				time.Sleep(tc.runs)
				stop()
				// Whatever was armed has fired or been stopped.
				time.Sleep(time.Hour)
				synctest.Wait()
				if got := c.closes.Load(); got != tc.wantClose {
					t.Errorf("closes = %d, want %d", got, tc.wantClose)
				}
			})
		})
	}
}

// TestWatchLeavesOtherDriversAlone shows that Watch arms nothing where it
// cannot or need not: a context that never ends, values of no driver,
// lib/pq's driver (not a connection), nil, and a sqlmock connection and
// transaction.
func TestWatchLeavesOtherDriversAlone(t *testing.T) {
	t.Parallel()
	db, mock, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mock.ExpectBegin()
	mock.ExpectRollback()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, e := range []any{nil, 42, &pq.Driver{}, tx, (*sql.Tx)(nil), (*sql.Conn)(nil), db} {
		if sock := socketOf(e); sock != nil {
			t.Errorf("socketOf(%T) = %v, want nil", e, sock)
		}
		Watch(ctx, e)()
	}
	Watch(context.Background(), tx)()
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// TestTxDriverConn shows that this Go release lays out database/sql's Tx
// as txDriverConn and txContext expect, so that a caller's transaction
// on lib/pq is watched, and one on pgx gets the key as a parameter
// ([TxForm]): the driver's connection under an open transaction
// is found, and none under an ended one, and so is the context it began
// under. When a Go release changes the layout,
// this test fails instead of the watchdog going quietly missing.
func TestTxDriverConn(t *testing.T) {
	t.Parallel()
	if !txLayout().ok {
		t.Fatal("database/sql's Tx no longer has closemu, done, dc and ctx, or driverConn no longer has ci, as txDriverConn and txContext read them")
	}
	db, mock, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mock.ExpectBegin()
	mock.ExpectRollback()
	type mark struct{}
	tx, err := db.BeginTx(context.WithValue(context.Background(), mark{}, "begun"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ctx := txContext(tx); ctx == nil || ctx.Value(mark{}) != "begun" {
		t.Errorf("txContext(tx) = %v, want the context tx began under", ctx)
	}
	dc := txDriverConn(tx)
	if got := fmt.Sprintf("%T", dc); !strings.Contains(got, "sqlmock") {
		t.Errorf("txDriverConn(open tx) = %s, want sqlmock's connection", got)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if dc := txDriverConn(tx); dc != nil {
		t.Errorf("txDriverConn(ended tx) = %T, want nil", dc)
	}
}

// TestPQSocketOfOtherValues shows that pqSocket reads a socket only out
// of lib/pq's connection type: a struct of another package with a field
// c of type net.Conn is not one.
func TestPQSocketOfOtherValues(t *testing.T) {
	t.Parallel()
	type conn struct{ c net.Conn }
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, v := range []any{&conn{c: a}, conn{c: a}, (*conn)(nil), &pq.Driver{}} {
		if sock := pqSocket(v); sock != nil {
			t.Errorf("pqSocket(%T) = %v, want nil", v, sock)
		}
	}
}
