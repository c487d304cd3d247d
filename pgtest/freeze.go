package pgtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// A Gate is a TCP proxy in front of a [Server] whose connections can be
// frozen: after [Gate.Freeze], nothing more passes on the connections open
// through it, in either direction, as if their backends had been stopped
// with SIGSTOP or the network dropped their packets. The client's socket
// stays open and its writes succeed, and no answer comes. Connections
// opened during the freeze pass, as a frozen backend's postmaster still
// answers: a driver's cancel request reaches the server, and the server
// acts on it, but the answer of the frozen session does not come back.
//
// [Gate.Thaw] lets the frozen connections run again, with what was held
// back. A client that closed its socket during the freeze is seen to have
// closed it at the thaw: the server reads its end, ends the session, and
// releases its locks.
type Gate struct {
	dsn      string
	listener net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	frozen map[*gateLink]bool // the links frozen by Freeze, until Thaw
	links  map[*gateLink]struct{}
	closed bool
	wg     sync.WaitGroup
}

// gateLink is one proxied connection. Its fields are guarded by Gate.mu.
type gateLink struct {
	client, server net.Conn
	dirs           [2]gateDir // toServer, toClient
	clientGone     bool       // the client closed its end
	dead           bool       // dropped: both ends closed
}

// gateDir is one direction of a link: what was read and not yet
// written, and whether the reading side has closed.
type gateDir struct {
	pending []byte
	eof     bool
}

// The directions of a link.
const (
	toServer = 0
	toClient = 1
)

// Gate starts a gate on 127.0.0.1 in front of s. It closes at tb's
// cleanup, with every connection through it; a freeze then ends.
func (s *Server) Gate(tb testing.TB) *Gate {
	tb.Helper()
	target, dsn, l := s.listenInFront(tb, "gate")
	g := &Gate{dsn: dsn, listener: l, frozen: map[*gateLink]bool{}, links: map[*gateLink]struct{}{}}
	g.cond = sync.NewCond(&g.mu)
	g.wg.Add(1)
	go g.serve(target)
	tb.Cleanup(g.close)
	return g
}

// DSN returns the server's DSN with the gate's host and port.
func (g *Gate) DSN() string { return g.dsn }

// Server returns a copy of s whose DSN leads through the gate, for
// [Server.Open].
func (g *Gate) Server(tb testing.TB, s *Server) *Server {
	tb.Helper()
	u, err := url.Parse(g.dsn)
	if err != nil {
		tb.Fatalf("pgtest: gate DSN: %v", err)
	}
	return s.WithDSN(tb, func(v *url.URL) { v.Host = u.Host })
}

// Freeze stops every connection open through the gate: from now on, bytes
// either side sends are held back until [Gate.Thaw].
func (g *Gate) Freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for lk := range g.links {
		g.frozen[lk] = true
	}
}

// Thaw lets the frozen connections run again.
func (g *Gate) Thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.frozen)
	g.cond.Broadcast()
}

// Held returns how many frozen connections their clients still hold
// open. A client that gives up a session that does not answer closes its
// end, and Held no longer counts it, although the server learns of it
// only at the thaw.
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for lk := range g.frozen {
		if !lk.clientGone {
			n++
		}
	}
	return n
}

// serve accepts clients until the gate closes.
func (g *Gate) serve(target string) {
	defer g.wg.Done()
	for {
		client, err := g.listener.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", target)
		if err != nil {
			client.Close()
			continue
		}
		lk := &gateLink{client: client, server: server}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		g.links[lk] = struct{}{}
		g.wg.Add(4)
		g.mu.Unlock()
		go g.read(lk, toServer, client)
		go g.write(lk, toServer, server)
		go g.read(lk, toClient, server)
		go g.write(lk, toClient, client)
	}
}

// read reads src, one side of lk, into direction d until src closes.
// It goes on reading while lk is frozen, so that a client's close is
// seen at once although nothing passes.
func (g *Gate) read(lk *gateLink, d int, src net.Conn) {
	defer g.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		g.mu.Lock()
		lk.dirs[d].pending = append(lk.dirs[d].pending, buf[:n]...)
		if err != nil {
			lk.dirs[d].eof = true
			if d == toServer {
				lk.clientGone = true
			}
		}
		g.cond.Broadcast()
		g.mu.Unlock()
		if err != nil {
			return // EOF or a closed connection
		}
	}
}

// write writes what direction d of lk has read to dst whenever lk is not
// frozen, and drops lk once the reading side has closed and all it sent
// has been written: a frozen peer learns of a close only at the thaw.
func (g *Gate) write(lk *gateLink, d int, dst net.Conn) {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		for !g.closed && !lk.dead && (g.frozen[lk] || len(lk.dirs[d].pending) == 0 && !lk.dirs[d].eof) {
			g.cond.Wait()
		}
		if g.closed || lk.dead {
			g.mu.Unlock()
			return
		}
		out, eof := lk.dirs[d].pending, lk.dirs[d].eof
		lk.dirs[d].pending = nil
		g.mu.Unlock()
		if len(out) > 0 {
			if _, err := dst.Write(out); err != nil {
				g.drop(lk)
				return
			}
		}
		if eof {
			g.drop(lk)
			return
		}
	}
}

// drop closes both sides of lk and forgets it.
func (g *Gate) drop(lk *gateLink) {
	lk.client.Close()
	lk.server.Close()
	g.mu.Lock()
	lk.dead = true
	delete(g.links, lk)
	delete(g.frozen, lk)
	g.cond.Broadcast()
	g.mu.Unlock()
}

// close stops the gate and closes every connection through it.
func (g *Gate) close() {
	g.mu.Lock()
	g.closed = true
	links := g.links
	g.links = map[*gateLink]struct{}{}
	g.cond.Broadcast()
	g.mu.Unlock()
	g.listener.Close()
	for lk := range links {
		lk.client.Close()
		lk.server.Close()
	}
	g.wg.Wait()
}
