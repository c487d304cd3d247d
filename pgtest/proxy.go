package pgtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a [Server] that counts round trips, to
// prove how many a call costs.
//
// It counts flights: a flight starts each time a client sends bytes after
// the server has sent bytes since that client's previous send, so one flight
// is one round trip that the client starts. TCP packets do not matter, only
// the direction of the bytes.
//
// The count is exact only when the client waits for the reply before it
// sends more, and only for one connection: use a *sql.DB on [Proxy.DSN] with
// SetMaxOpenConns(1), run a warm-up query so that the connection exists,
// then [Proxy.Reset] before the measured call. A cancel request opens a
// connection of its own, and counts as a flight on it.
//
// pgx stdlib pings a pooled connection when the *sql.DB hands it out again
// after more than a second idle, and the first time it does: measure pgx on
// a *sql.Conn, which database/sql never resets, to leave that ping out.
type Proxy struct {
	server   *Server
	dsn      string
	listener net.Listener

	mu      sync.Mutex
	flights int64
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// link is the state of one proxied connection.
type link struct {
	fromClient bool // the last bytes went from client to server
}

// Proxy starts a proxy on 127.0.0.1 in front of s. It closes at tb's cleanup,
// with every connection through it.
func (s *Server) Proxy(tb testing.TB) *Proxy {
	tb.Helper()
	target, dsn, l := s.listenInFront(tb, "proxy")
	p := &Proxy{server: s, dsn: dsn, listener: l, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve(target)
	tb.Cleanup(p.close)
	return p
}

// listenInFront opens a listener on a free port of 127.0.0.1 for a
// middleman (what: "proxy", "gate") in front of s, and returns the
// address of s to forward to and s's DSN with the listener's host and
// port.
func (s *Server) listenInFront(tb testing.TB, what string) (target, dsn string, l net.Listener) {
	tb.Helper()
	u, err := url.Parse(s.DSN)
	if err != nil || u.Host == "" {
		tb.Fatalf("pgtest: %s for %s: the DSN is not a host:port URL", what, s.Name)
	}
	target = u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtest: %s for %s: %v", what, s.Name, err)
	}
	u.Host = l.Addr().String()
	return target, u.String(), l
}

// DSN returns the server's DSN with the proxy's host and port.
func (p *Proxy) DSN() string { return p.dsn }

// Flights returns the number of client-to-server flights since the start or
// the last [Proxy.Reset].
func (p *Proxy) Flights() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flights
}

// Reset sets the flight count to zero.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flights = 0
}

// serve accepts clients until the proxy closes.
func (p *Proxy) serve(target string) {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.add(client, server) {
			return
		}
		lk := &link{}
		p.wg.Add(2)
		go p.pipe(lk, client, server, true)
		go p.pipe(lk, server, client, false)
	}
}

// add records the connections of one link; it closes them and reports false
// when the proxy is closed.
func (p *Proxy) add(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst until either side closes, then closes both. After each read it notes the direction under the
// lock, counting a flight when it turns to client-to-server, and only then
// writes, so the server cannot answer bytes that were not counted yet.
func (p *Proxy) pipe(lk *link, src, dst net.Conn, fromClient bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if fromClient && !lk.fromClient {
				p.flights++
			}
			lk.fromClient = fromClient
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: close both sides
		}
	}
}

// close stops the proxy and closes every connection through it.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.listener.Close()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
