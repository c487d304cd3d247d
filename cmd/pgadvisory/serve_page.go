package main

import (
	"cmp"
	_ "embed"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/inspect"
)

// This file turns the lock state into pgadvisory serve's page.

//go:embed serve_page.html
var servePageHTML string

//go:embed serve_page.css
var servePageCSS string

// servePage is the page's template. html/template escapes every value by
// where it stands: text, attribute, URL or SVG.
var servePage = template.Must(template.New("page").Parse(servePageHTML))

// lockState is what one view of the page reads: the locks, the
// namespaces of the dictionary table, the database, and when.
type lockState struct {
	Database   string
	Read       time.Time
	Locks      []inspect.Lock
	Namespaces []advisory.Namespace // from the dictionary table, by ID
	Dictionary string               // the dictionary table, or "" when it does not exist
}

// pageData is what the template renders.
type pageData struct {
	Database   string
	Read       string
	Refresh    int // seconds between automatic reloads; 0 for none
	Refreshes  []refreshChoice
	Now        string // the URL that reloads the page as it is
	CSS        template.CSS
	Error      string
	Dictionary string
	Namespaces []namespaceRow
	Locks      []lockRow
	Held       int
	Waiting    int
	Graph      *waitGraphSVG
	GraphText  string
}

// refreshChoice is one link that sets the automatic reload.
type refreshChoice struct {
	Label   string
	Href    string
	Current bool
}

// refreshChoices are the reload intervals the page offers, in seconds.
var refreshChoices = []int{0, 5, 10, 30, 60}

// namespaceRow is a row of the namespaces table.
type namespaceRow struct {
	ID            string
	Name          string
	Owner, Doc    string
	Held, Waiting int
}

// lockRow is a row of the locks table.
type lockRow struct {
	ID        string // the row's element ID: lock-PID-KEY-MODE
	Key       string
	Namespace string
	Mode      string
	State     string // "held" or "waiting"
	PID       int
	App       string
	User      string
	Session   string
	Age       string
	BlockedBy string
}

// newPageData builds the page for s, to reload every refresh seconds.
func newPageData(s lockState, refresh int) pageData {
	p := pageData{
		Database:   s.Database,
		Read:       s.Read.Format("2006-01-02 15:04:05 MST"),
		Refresh:    refresh,
		Now:        refreshHref(refresh),
		CSS:        template.CSS(servePageCSS),
		Dictionary: s.Dictionary,
		Graph:      layoutWaitGraph(s.Locks, s.Read),
		GraphText:  inspect.WaitGraph(s.Locks),
	}
	for _, r := range refreshChoices {
		label := "off"
		if r > 0 {
			label = (time.Duration(r) * time.Second).String()
		}
		p.Refreshes = append(p.Refreshes, refreshChoice{Label: label, Href: refreshHref(r), Current: r == refresh})
	}
	counts := make(map[string]*namespaceRow)
	for _, ns := range s.Namespaces {
		row := &namespaceRow{ID: strconv.Itoa(int(ns.ID)), Name: ns.Name, Owner: ns.Owner, Doc: ns.Doc}
		counts[ns.Name] = row
	}
	for _, l := range s.Locks {
		state := "held"
		if l.Granted {
			p.Held++
		} else {
			state = "waiting"
			p.Waiting++
		}
		p.Locks = append(p.Locks, lockRow{
			ID:        "lock-" + strconv.Itoa(l.PID) + "-" + l.Key.String() + "-" + l.Mode(),
			Key:       l.Key.String(),
			Namespace: l.Namespace,
			Mode:      l.Mode(),
			State:     state,
			PID:       l.PID,
			App:       l.ApplicationName,
			User:      l.User,
			Session:   l.State,
			Age:       age(l, s.Read),
			BlockedBy: pids(l.BlockedBy),
		})
		if l.Namespace == "" {
			continue
		}
		row := counts[l.Namespace]
		if row == nil {
			// A namespace the registry knows but the table does
			// not, such as the library's own.
			row = &namespaceRow{ID: namespaceID(l.Key), Name: l.Namespace}
			counts[l.Namespace] = row
		}
		if l.Granted {
			row.Held++
		} else {
			row.Waiting++
		}
	}
	for _, row := range counts {
		p.Namespaces = append(p.Namespaces, *row)
	}
	slices.SortFunc(p.Namespaces, func(a, b namespaceRow) int {
		ai, _ := strconv.Atoi(a.ID)
		bi, _ := strconv.Atoi(b.ID)
		return cmp.Or(cmp.Compare(ai, bi), strings.Compare(a.Name, b.Name))
	})
	return p
}

// namespaceID returns the first half of a pair key, as text.
func namespaceID(k advisory.Key) string {
	if a, _, ok := k.Pair(); ok {
		return strconv.Itoa(int(a))
	}
	return ""
}

// refreshHref is the page's URL with an automatic reload every r seconds.
func refreshHref(r int) string {
	return "/?refresh=" + strconv.Itoa(r)
}
