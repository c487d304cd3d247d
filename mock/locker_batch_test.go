package mock_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// Releases that arrive while another is in flight on the Locker's
// connection go together, as ExpectReleases lays down.
func TestLockerExpectReleases(t *testing.T) {
	db, m := mock.New(t)
	keys := []advisory.Key{advisory.Int64Key(1), advisory.Int64Key(2), advisory.PairKey(3, 4)}
	c := mock.ExpectLockerConn(m)
	for _, k := range keys {
		c.ExpectAcquire(k, mock.LeaseGranted)
	}
	c.ExpectRelease(keys[0]).WillDelayFor(time.Second)
	c.ExpectReleases(keys[1:])
	c.ExpectClose()
	ctx := context.Background()
	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1, Heartbeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var ls []*advisory.Lease
	for _, k := range keys {
		l, err := lk.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	errs := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errs <- l.Release(ctx) }()
		// In order: the first is in flight, the others queue behind it.
		time.Sleep(200 * time.Millisecond)
	}
	for range ls {
		if err := <-errs; err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	if err := lk.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := m.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
