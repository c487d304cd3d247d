package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pgadvisory/pgadvisory/advisory/inspect"
)

// This file lays out the wait graph of pgadvisory serve's page: who
// blocks whom, drawn as inline SVG on the server, with no script. Each
// session that waits, or blocks one that waits, is a box; each box stands
// in a column one to the right of the rightmost session that blocks it,
// so that a chain reads from left to right; an arrow goes from each
// blocker to each session it blocks.

// Sizes of the graph, in SVG user units (pixels).
const (
	graphNodeWidth  = 300
	graphNodeHeight = 58
	graphColumnGap  = 90
	graphRowGap     = 22
	graphMargin     = 16
	graphLabelRunes = 40 // longer lines are cut, with the whole in a tooltip
)

// waitGraphSVG is what the page's template needs to draw the graph.
type waitGraphSVG struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
}

// graphNode is one session's box.
type graphNode struct {
	PID           int
	X, Y          int
	Waiting       bool   // the session waits for a lock
	Title         string // the first line: pid and application
	Detail        string // the second line: what it waits for or holds
	Tooltip       string // both lines uncut
	TextX         int
	TitleY, LineY int
	Width, Height int
}

// graphEdge is one arrow from a blocker to a session it blocks.
type graphEdge struct {
	Blocker, Waiter int
	Path            string // the SVG path's d
	Back            bool   // it goes right to left, on a wait cycle
	Tooltip         string
}

// layoutWaitGraph lays out who blocks whom among locks, as
// inspect.Locks returns them, at now. It returns nil when no session
// waits.
func layoutWaitGraph(locks []inspect.Lock, now time.Time) *waitGraphSVG {
	app := make(map[int]string)
	holds := make(map[int][]inspect.Lock)
	waits := make(map[int]inspect.Lock)
	blockers := make(map[int][]int)
	in := make(map[int]bool)
	for _, l := range locks {
		if l.ApplicationName != "" {
			app[l.PID] = l.ApplicationName
		}
		if l.Granted {
			holds[l.PID] = append(holds[l.PID], l)
			continue
		}
		if _, ok := waits[l.PID]; !ok {
			waits[l.PID] = l
		}
		in[l.PID] = true
		for _, b := range l.BlockedBy {
			in[b] = true
			if !slices.Contains(blockers[l.PID], b) {
				blockers[l.PID] = append(blockers[l.PID], b)
			}
		}
	}
	if len(waits) == 0 {
		return nil
	}
	var pids []int
	for pid := range in {
		pids = append(pids, pid)
	}
	slices.Sort(pids)

	// A session's column is one more than its blockers' greatest; on a
	// cycle, a blocker still being placed counts as column 0.
	column := make(map[int]int)
	placing := make(map[int]bool)
	var place func(pid int) int
	place = func(pid int) int {
		if c, ok := column[pid]; ok {
			return c
		}
		if placing[pid] {
			return -1
		}
		placing[pid] = true
		c := 0
		for _, b := range blockers[pid] {
			c = max(c, place(b)+1)
		}
		placing[pid] = false
		column[pid] = c
		return c
	}
	for _, pid := range pids {
		place(pid)
	}

	g := &waitGraphSVG{}
	rows := make(map[int]int) // the next free row of each column
	at := make(map[int]*graphNode)
	for _, pid := range pids {
		c := column[pid]
		r := rows[c]
		rows[c]++
		n := graphNode{
			PID:    pid,
			X:      graphMargin + c*(graphNodeWidth+graphColumnGap),
			Y:      graphMargin + r*(graphNodeHeight+graphRowGap),
			Width:  graphNodeWidth,
			Height: graphNodeHeight,
			Title:  sessionName(pid, app[pid]),
		}
		n.TextX, n.TitleY, n.LineY = n.X+10, n.Y+22, n.Y+44
		if w, ok := waits[pid]; ok {
			n.Waiting = true
			n.Detail = waitText(w, now)
		} else if hs := holds[pid]; len(hs) > 0 {
			n.Detail = holdText(hs)
		} else {
			n.Detail = "holds nothing visible here"
		}
		n.Tooltip = n.Title + ": " + n.Detail
		n.Title, n.Detail = cut(n.Title), cut(n.Detail)
		g.Nodes = append(g.Nodes, n)
		g.Width = max(g.Width, n.X+n.Width+graphMargin)
		g.Height = max(g.Height, n.Y+n.Height+graphMargin)
	}
	bottom := 0 // the lowest box's bottom
	for i := range g.Nodes {
		at[g.Nodes[i].PID] = &g.Nodes[i]
		bottom = max(bottom, g.Nodes[i].Y+g.Nodes[i].Height)
	}
	for _, waiter := range pids {
		bs := slices.Clone(blockers[waiter])
		slices.Sort(bs)
		for _, b := range bs {
			from, to := at[b], at[waiter]
			e := graphEdge{Blocker: b, Waiter: waiter, Tooltip: sessionName(b, app[b]) + " blocks " + sessionName(waiter, app[waiter])}
			switch step := graphNodeWidth + graphColumnGap; {
			case to.X-from.X == step:
				// Right side of the blocker to the left side of the
				// waiter, in the next column.
				x1, y1 := from.X+from.Width, from.Y+from.Height/2
				x2, y2 := to.X-6, to.Y+to.Height/2
				mid := (x1 + x2) / 2
				e.Path = fmt.Sprintf("M %d %d C %d %d, %d %d, %d %d", x1, y1, mid, y1, mid, y2, x2, y2)
			case to.X > from.X:
				// Past the columns between, in a lane below every box,
				// so that it does not seem to leave a box between.
				x1, y1 := from.X+from.Width, from.Y+from.Height/2
				x2, y2 := to.X-6, to.Y+to.Height/2
				low := bottom + graphRowGap
				e.Path = fmt.Sprintf("M %d %d C %d %d, %d %d, %d %d L %d %d C %d %d, %d %d, %d %d",
					x1, y1, x1+graphColumnGap/2, y1, x1+graphColumnGap/2, low, x1+graphColumnGap, low,
					x2-graphColumnGap, low,
					x2-graphColumnGap/2, low, x2-graphColumnGap/2, y2, x2, y2)
				g.Height = max(g.Height, low+graphMargin)
			default:
				// A cycle: from the blocker's bottom, below both boxes,
				// up into the waiter's bottom.
				e.Back = true
				x1, y1 := from.X+from.Width/3, from.Y+from.Height
				x2, y2 := to.X+2*to.Width/3, to.Y+to.Height+6
				low := max(y1, y2) + graphRowGap
				e.Path = fmt.Sprintf("M %d %d C %d %d, %d %d, %d %d", x1, y1, x1, low, x2, low, x2, y2)
				g.Height = max(g.Height, low+graphMargin)
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

// sessionName names a session: "pid 4242 (billing-api)".
func sessionName(pid int, app string) string {
	if pid == 0 {
		return "prepared transaction"
	}
	s := "pid " + strconv.Itoa(pid)
	if app != "" {
		s += " (" + app + ")"
	}
	return s
}

// lockText renders a lock's mode, key and namespace: "exclusive 7:1 [billing]".
func lockText(l inspect.Lock) string {
	s := l.Mode() + " " + l.Key.String()
	if l.Namespace != "" {
		s += " [" + l.Namespace + "]"
	}
	return s
}

// waitText renders what a waiter waits for: "waits 1.5s for exclusive 7:1 [billing]".
func waitText(l inspect.Lock, now time.Time) string {
	if a := age(l, now); a != "" {
		return "waits " + a + " for " + lockText(l)
	}
	return "waits for " + lockText(l)
}

// holdText renders what a session holds: "holds exclusive 7:1 [billing] and 2 more".
func holdText(hs []inspect.Lock) string {
	s := "holds " + lockText(hs[0])
	if len(hs) > 1 {
		s += " and " + strconv.Itoa(len(hs)-1) + " more"
	}
	return s
}

// cut shortens s to graphLabelRunes runes, ending a cut one in "…".
func cut(s string) string {
	if utf8.RuneCountInString(s) <= graphLabelRunes {
		return s
	}
	r := []rune(s)
	return string(r[:graphLabelRunes-1]) + "…"
}
