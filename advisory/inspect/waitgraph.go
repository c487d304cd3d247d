package inspect

import (
	"slices"
	"strings"
)

// WaitGraph renders who blocks whom among locks, as [Locks] returns
// them, as indented text for a log or a terminal. Each tree starts at a
// session that blocks others without waiting itself; each line below it
// is a session blocked by the line above:
//
//	pid 4242 (billing-api): holds exclusive 7:1 [billing]
//	  blocks pid 4243 (billing-worker): waits 1.5s for exclusive 7:1 [billing]; holds exclusive 7:9
//	    blocks pid 4250 (report): waits 200ms for shared 7:9
//
// A session blocked by several others appears in full under the first and
// as "(see above)" under the rest, and a wait cycle, which the server is
// about to break as a deadlock, ends in "(cycle)". A waiter whose blockers
// are unknown forms a tree of its own. Trees, and the sessions within
// them, come in PID order, so the same locks always give the same text.
// WaitGraph returns "" when no session waits.
func WaitGraph(locks []Lock) string {
	g := newWaitGraph(locks)
	if len(g.waiting) == 0 {
		return ""
	}
	var b strings.Builder
	printed := make(map[int]bool)
	onPath := make(map[int]bool)

	var walk func(pid, depth int)
	walk = func(pid, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		if depth > 0 {
			b.WriteString("blocks ")
		}
		switch {
		case onPath[pid]:
			b.WriteString(pidLabel(pid, g.app[pid]) + " (cycle)\n")
			return
		case printed[pid]:
			b.WriteString(pidLabel(pid, g.app[pid]) + " (see above)\n")
			return
		}
		printed[pid] = true
		b.WriteString(g.describe(pid))
		b.WriteByte('\n')
		onPath[pid] = true
		for _, w := range g.blocks[pid] {
			walk(w, depth+1)
		}
		onPath[pid] = false
	}

	// Sessions that block others and wait for nothing come first; then
	// waiters with no known blocker; then whatever is left, which lies on
	// cycles, from its lowest PID.
	for _, pid := range g.pids {
		if len(g.blocks[pid]) > 0 && g.waiting[pid] == nil {
			walk(pid, 0)
		}
	}
	for _, pid := range g.pids {
		if w := g.waiting[pid]; w != nil && len(w.BlockedBy) == 0 && !printed[pid] {
			walk(pid, 0)
		}
	}
	for _, pid := range g.pids {
		if g.waiting[pid] != nil && !printed[pid] {
			walk(pid, 0)
		}
	}
	return b.String()
}

// waitGraph indexes locks by session.
type waitGraph struct {
	pids    []int          // every session, ascending
	app     map[int]string // application_name by PID
	holds   map[int][]Lock // granted locks by PID
	waiting map[int]*Lock  // the lock each session waits for
	blocks  map[int][]int  // the sessions each session blocks, ascending
}

// newWaitGraph indexes locks by session and links each waiter to the
// sessions that block it.
func newWaitGraph(locks []Lock) *waitGraph {
	g := &waitGraph{
		app:     make(map[int]string),
		holds:   make(map[int][]Lock),
		waiting: make(map[int]*Lock),
		blocks:  make(map[int][]int),
	}
	seen := make(map[int]bool)
	add := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			g.pids = append(g.pids, pid)
		}
	}
	for i := range locks {
		l := &locks[i]
		add(l.PID)
		if l.ApplicationName != "" {
			g.app[l.PID] = l.ApplicationName
		}
		if l.Granted {
			g.holds[l.PID] = append(g.holds[l.PID], *l)
			continue
		}
		if g.waiting[l.PID] == nil {
			g.waiting[l.PID] = l
		}
		for _, b := range l.BlockedBy {
			add(b)
			if !slices.Contains(g.blocks[b], l.PID) {
				g.blocks[b] = append(g.blocks[b], l.PID)
			}
		}
	}
	slices.Sort(g.pids)
	for _, ws := range g.blocks {
		slices.Sort(ws)
	}
	for _, hs := range g.holds {
		slices.SortStableFunc(hs, compareLocks)
	}
	return g
}

// describe renders what a session waits for and holds:
// `pid 4243 (billing-worker): waits 1.5s for exclusive 7:1; holds shared 42`.
func (g *waitGraph) describe(pid int) string {
	var parts []string
	if w := g.waiting[pid]; w != nil {
		parts = append(parts, w.waits()+" for "+w.what())
	}
	if hs := g.holds[pid]; len(hs) > 0 {
		what := make([]string, len(hs))
		for i, h := range hs {
			what[i] = h.what()
		}
		parts = append(parts, "holds "+strings.Join(what, ", "))
	}
	s := pidLabel(pid, g.app[pid])
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	return s
}
