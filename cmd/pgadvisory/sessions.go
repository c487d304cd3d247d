package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file holds what makes the server end pgadvisory's sessions when
// pgadvisory ends: stopped (the command waits for the server to end them)
// or killed (the server finds the client gone by itself).

// checkInterval is how often a session of pgadvisory's has the server
// check, while a statement runs, that pgadvisory is still connected: a
// wait for a lock whose pgadvisory was killed ends within about this
// long, instead of when the lock is granted. It is the session's
// client_connection_check_interval (PostgreSQL 14 and later).
const checkInterval = time.Second

// sqlCheckClient sets client_connection_check_interval to checkInterval
// on the session, unless the session has a value already: from the
// server's configuration, the role or database, or the DSN's options
// (options=-c ...) or PGOPTIONS. On a server before PostgreSQL 14 the
// setting does not exist, current_setting(..., true) returns NULL, and
// nothing is set.
var sqlCheckClient = fmt.Sprintf(`SELECT pg_catalog.set_config('client_connection_check_interval', '%dms', false)
WHERE pg_catalog.current_setting('client_connection_check_interval', true) = '0'`, checkInterval.Milliseconds())

// endTimeout bounds how long closing the database waits for the server
// to end sessions whose statement was interrupted.
const endTimeout = 5 * time.Second

// sessions are the connections a database has opened, so that closing
// it can wait until the server has ended each one.
//
// A statement that is interrupted, such as a wait for a lock when a
// signal arrives, makes pgx drop its connection in the background: it
// sends the server a cancel request, then a goodbye (Terminate), and reads
// until the server closes the socket, which the server does once the
// backend has ended and released its locks. A process that exits before
// that leaves its wait queued on the server, where it takes the lock when
// it is free and keeps it until the server notices the client is gone.
// pgx closes a connection's CleanupDone channel when the background close
// has ended.
type sessions struct {
	mu    sync.Mutex
	conns []*pgconn.PgConn
}

// afterConnect is the pool's stdlib.OptionAfterConnect: it records the
// new connection, and asks the server to check that pgadvisory is still
// there while a statement runs. A server that refuses the setting, as
// one on a platform without the check does, leaves the session as it
// was.
func (s *sessions) afterConnect(ctx context.Context, c *pgx.Conn) error {
	s.add(c.PgConn())
	_, err := c.Exec(ctx, sqlCheckClient)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
		return nil
	}
	return err
}

// add records c, and forgets the connections that have ended.
func (s *sessions) add(c *pgconn.PgConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.conns[:0]
	for _, old := range s.conns {
		if !ended(old) {
			live = append(live, old)
		}
	}
	s.conns = append(live, c)
}

// await waits, at most timeout, until every connection that is closed has
// ended: the server has closed its socket, or pgx has given up on it. A
// connection still open is not waited for: it is still in use, and ends
// when the process does.
func (s *sessions) await(timeout time.Duration) {
	s.mu.Lock()
	conns := append([]*pgconn.PgConn(nil), s.conns...)
	s.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, c := range conns {
		if !c.IsClosed() {
			continue
		}
		select {
		case <-c.CleanupDone():
		case <-deadline.C:
			return
		}
	}
}

// ended reports whether c is closed and done closing.
func ended(c *pgconn.PgConn) bool {
	select {
	case <-c.CleanupDone():
		return true
	default:
		return false
	}
}
