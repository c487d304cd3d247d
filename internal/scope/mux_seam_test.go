package scope

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// fakeCarrierSession is a Locker session of no driver: it starts a
// carrier as backend 7 with mark 9, answers each Exec with rows[query],
// and records what the Mux sent. With fakePool, it proves that a Mux
// needs nothing of database/sql.
type fakeCarrierSession struct {
	p    *fakePool
	rows map[string]int64
}

func (f *fakeCarrierSession) Exec(_ context.Context, query string, _ ...any) (int64, error) {
	f.p.record(query)
	return f.rows[query], nil
}

func (f *fakeCarrierSession) QueryRow(_ context.Context, query string, _ ...any) Row {
	f.p.record(query)
	return carrierStartRow{}
}

func (f *fakeCarrierSession) Query(_ context.Context, query string, _ ...any) (Rows, error) {
	f.p.record(query)
	return nil, errors.New("no rows in the fake")
}

func (f *fakeCarrierSession) Engine(context.Context) (*Engine, error) { return nil, nil }
func (f *fakeCarrierSession) Discard()                                { f.p.mu.Lock(); f.p.discarded++; f.p.mu.Unlock() }
func (f *fakeCarrierSession) Close()                                  { f.p.mu.Lock(); f.p.closed++; f.p.mu.Unlock() }
func (f *fakeCarrierSession) CloseUnderTx(bool)                       {}

// carrierStartRow answers sqltext.CarrierStart: backend 7, a primary,
// mark 9.
type carrierStartRow struct{}

func (carrierStartRow) Scan(dest ...any) error {
	mark := int64(9)
	*dest[0].(*int64), *dest[1].(*bool), *dest[2].(**int64) = 7, false, &mark
	return nil
}

// fakePool is the MuxSource of fakeCarrierSessions.
type fakePool struct {
	engine *Engine
	rows   map[string]int64
	gate   chan struct{} // when set, each OpenSession waits for it to close
	delay  time.Duration // how long each OpenSession takes

	mu        sync.Mutex
	sent      []string
	opened    int // OpenSession calls
	made      int // sessions they returned
	discarded int
	closed    int
}

func (p *fakePool) record(query string) {
	p.mu.Lock()
	p.sent = append(p.sent, query)
	p.mu.Unlock()
}

func (p *fakePool) OpenSession(ctx context.Context) (ScopeSession, error) {
	p.mu.Lock()
	p.opened++
	p.mu.Unlock()
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if p.delay > 0 {
		select {
		case <-time.After(p.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	p.made++
	p.mu.Unlock()
	return &fakeCarrierSession{p: p, rows: p.rows}, nil
}

func (p *fakePool) Engine(context.Context) (*Engine, error) { return p.engine, nil }
func (p *fakePool) Form() sqltext.Form                      { return sqltext.Params }

// TestSeamMux checks a Mux on the seam: a try, a release and Close each
// send one statement on the carrier the source opened, which then goes
// back to it undiscarded; an engine the source names as unable to hold a
// session lock refuses the acquisition before any session is opened.
func TestSeamMux(t *testing.T) {
	t.Parallel()
	key := sqltext.Key{Bigint: 1}
	crdb := &Engine{Name: CockroachDB, Session: crdbSession, Xact: crdbXact}
	rows := map[string]int64{
		sqltext.CarrierTry(7, 9, false, key):    2,
		sqltext.CarrierUnlock(7, 9, false, key): 1,
		sqltext.CarrierRelease(7, 9):            1,
	}
	tests := []struct {
		name     string
		engine   *Engine
		wantErr  error
		wantSent []string
	}{
		{name: "AcquireReleaseClose", engine: &Engine{Name: PostgreSQL},
			wantSent: []string{sqltext.CarrierStart, sqltext.CarrierTry(7, 9, false, key),
				sqltext.CarrierUnlock(7, 9, false, key), sqltext.CarrierRelease(7, 9)}},
		{name: "EngineRefuses", engine: crdb, wantErr: ErrUnsupportedEngine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &fakePool{engine: tt.engine, rows: rows}
			mx := NewMux(p, 1, 0, 10*time.Second, nil)
			ctx := context.Background()
			l, err := mx.Acquire(ctx, key, &Options{Try: true})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Acquire = %v; want %v", err, tt.wantErr)
			}
			if l != nil {
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release = %v", err)
				}
			}
			if err := mx.Close(ctx); err != nil {
				t.Errorf("Close = %v", err)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if !slices.Equal(p.sent, tt.wantSent) {
				t.Errorf("sent %q; want %q", p.sent, tt.wantSent)
			}
			want := min(len(tt.wantSent), 1) // the carrier's, if it opened
			if p.opened != want || p.closed != want || p.discarded != 0 {
				t.Errorf("sessions opened %d, closed %d, discarded %d; want %d, %d, 0",
					p.opened, p.closed, p.discarded, want, want)
			}
		})
	}
}

// TestMuxCloseEndsWaitForOpening checks that acquisitions waiting for the
// first carriers being opened end with ErrLockerClosed when Close comes
// first: a burst of 8 opens 4 and the other 4 wait for them. Close ends
// the openings too, and waits for them, so that no session opens after
// it.
func TestMuxCloseEndsWaitForOpening(t *testing.T) {
	t.Parallel()
	p := &fakePool{engine: &Engine{Name: PostgreSQL}, rows: map[string]int64{sqltext.CarrierRelease(7, 9): 1},
		gate: make(chan struct{})}
	mx := NewMux(p, 10, 0, 10*time.Second, nil)
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			l, err := mx.Acquire(context.Background(), sqltext.Key{Bigint: int64(i)}, &Options{Try: true})
			if l != nil {
				err = errors.New("acquired on a closed Mux")
			}
			errs <- err
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		opened := p.opened
		p.mu.Unlock()
		if opened == spreadCarriers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions opening; want %d", opened, spreadCarriers)
		}
	}
	if err := mx.Close(context.Background()); err != nil {
		t.Errorf("Close = %v", err)
	}
	close(p.gate)
	stuck := time.After(10 * time.Second)
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrLockerClosed) {
				t.Errorf("Acquire = %v; want ErrLockerClosed", err)
			}
		case <-stuck:
			t.Fatal("an acquisition still waits 10 s after Close")
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opened != spreadCarriers || p.closed != 0 {
		t.Errorf("sessions being opened %d, closed %d; want %d, 0 (Close ended the openings)", p.opened, p.closed, spreadCarriers)
	}
}

// TestMuxOpensAcrossDeadlines checks that a carrier whose opening takes
// longer than each acquisition's deadline opens all the same: the
// acquisition that started it fails at its deadline, and a later one
// finds it open. Were each opening cut short by its acquisition's end, no
// acquisition would ever succeed.
func TestMuxOpensAcrossDeadlines(t *testing.T) {
	t.Parallel()
	key := sqltext.Key{Bigint: 1}
	p := &fakePool{engine: &Engine{Name: PostgreSQL}, delay: 200 * time.Millisecond, rows: map[string]int64{
		sqltext.CarrierTry(7, 9, false, key):    2,
		sqltext.CarrierUnlock(7, 9, false, key): 1,
		sqltext.CarrierRelease(7, 9):            1,
	}}
	mx := NewMux(p, 10, 0, 10*time.Second, nil)
	var failed int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		l, err := mx.Acquire(ctx, key, &Options{Try: true})
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Acquire = %v; want a deadline exceeded while the carrier opens", err)
			}
			failed++
			continue
		}
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("Release = %v", err)
		}
		if err := mx.Close(context.Background()); err != nil {
			t.Errorf("Close = %v", err)
		}
		if failed == 0 {
			t.Error("the first acquisition succeeded; want it to fail while the carrier opens")
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.opened > spreadCarriers || p.made == 0 || p.closed != p.made || p.discarded != 0 {
			t.Errorf("sessions being opened %d, opened %d, closed %d, discarded %d; want at most %d being opened, each one opened closed, none discarded",
				p.opened, p.made, p.closed, p.discarded, spreadCarriers)
		}
		return
	}
	_ = mx.Close(context.Background())
	t.Fatalf("no acquisition succeeded in 10 s (%d failed): the carrier never opened", failed)
}
