package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/inspect"
)

// serveFixture is a lock state with a chain (4242 blocks 4243, which
// blocks 4250), a shared holder, a bigint key and an application name
// that tries to inject markup.
func serveFixture(read time.Time) lockState {
	night, morning, daily := advisory.PairKey(7, 1), advisory.PairKey(7, 2), advisory.PairKey(8, 1)
	return lockState{
		Database:   "app",
		Read:       read,
		Dictionary: "pgadvisory.namespaces",
		Namespaces: []advisory.Namespace{{ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs"}, {ID: 8, Name: "reports"}},
		Locks: []inspect.Lock{
			{Key: night, Namespace: "billing", Granted: true, PID: 4242, ApplicationName: "billing-api", User: "app", State: "idle", StateChange: read.Add(-90 * time.Second)},
			{Key: night, Namespace: "billing", PID: 4243, ApplicationName: "billing-worker", User: "app", State: "active", Waited: 1500 * time.Millisecond, BlockedBy: []int{4242}},
			{Key: morning, Namespace: "billing", Granted: true, PID: 4243, ApplicationName: "billing-worker", User: "app", State: "active"},
			{Key: morning, Namespace: "billing", Shared: true, PID: 4250, ApplicationName: `<script>alert("x")</script>`, User: "app", State: "active", Waited: 200 * time.Millisecond, BlockedBy: []int{4243}},
			{Key: daily, Namespace: "reports", Shared: true, Granted: true, PID: 4300, ApplicationName: "report", User: "app", State: "idle in transaction"},
			{Key: advisory.Int64Key(42), Granted: true, PID: 4300, ApplicationName: "report", User: "app", State: "idle in transaction"},
		},
	}
}

// get serves one request to h and returns the response and its body.
func get(t *testing.T, h http.Handler, method, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

// fixed returns a readStateFunc that returns s and err.
func fixed(s lockState, err error) readStateFunc {
	return func(context.Context) (lockState, error) { return s, err }
}

// metricsStub stands in for /metrics.
var metricsStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "pgadvisory_up 1\n")
})

// TestServePage renders the page of serveFixture and checks what a person
// reads there: the holders and waiters, namespace names, ages, the wait
// graph's boxes and arrows, and the escaping of what sessions name
// themselves.
func TestServePage(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	h := newServeHandler(fixed(serveFixture(now), nil), metricsStub, 10)
	res, body := get(t, h, http.MethodGet, "/")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d\n%s", res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	for _, want := range []string{
		`<code id="database">app</code>`,
		`<span id="held">4</span> held, <span id="waiting">2</span> awaited`,
		`<meta http-equiv="refresh" content="10">`,
		`<a href="/?refresh=10" id="reload">Refresh now</a>`,
		`<a href="/?refresh=10" class="current" aria-current="page">10s</a>`,
		// The locks table: holders and waiters, namespace, ages.
		`id="lock-4242-7:1-exclusive" data-pid="4242" data-key="7:1" data-state="held"><td><code>7:1</code></td><td>billing</td><td>exclusive</td><td>held</td><td class="num">4242</td><td>billing-api</td><td>app</td><td>idle</td><td class="num">1m30s</td><td></td></tr>`,
		`id="lock-4243-7:1-exclusive" data-pid="4243" data-key="7:1" data-state="waiting"><td><code>7:1</code></td><td>billing</td><td>exclusive</td><td>waiting</td><td class="num">4243</td><td>billing-worker</td><td>app</td><td>active</td><td class="num">1.5s</td><td>4242</td></tr>`,
		`id="lock-4250-7:2-shared"`,
		`id="lock-4300-42-exclusive" data-pid="4300" data-key="42" data-state="held"><td><code>42</code></td><td></td>`,
		// Namespaces, with counts.
		`<tr id="namespace-7"><td class="num">7</td><td>billing</td><td>team-payments</td><td>invoice runs</td><td class="num">2</td><td class="num">2</td></tr>`,
		`<tr id="namespace-8"><td class="num">8</td><td>reports</td><td></td><td></td><td class="num">1</td><td class="num">0</td></tr>`,
		// The graph: the chain's two arrows, the boxes.
		`id="edge-4242-4243" data-blocker="4242" data-waiter="4243"`,
		`id="edge-4243-4250" data-blocker="4243" data-waiter="4250"`,
		`<g class="node" id="node-4242" data-pid="4242">`,
		`<g class="node waiting" id="node-4243" data-pid="4243">`,
		`>waits 1.5s for exclusive 7:1 [billing]</text>`,
		`>holds exclusive 7:1 [billing]</text>`,
		// Escaped, in text and in the graph.
		`<td>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script") {
		t.Error("an application name reached the page unescaped")
	}
	if n := strings.Count(body, `class="edge`); n != 2 {
		t.Errorf("%d arrows in the graph, want 2", n)
	}
	if strings.Contains(body, `id="node-4300"`) {
		t.Error("a session that neither waits nor blocks is in the wait graph")
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestServePageRefresh checks ?refresh=: seconds or a duration override
// the default, 0 turns the reload off, and a bad value is a 400.
func TestServePageRefresh(t *testing.T) {
	t.Parallel()
	h := newServeHandler(fixed(serveFixture(time.Now()), nil), metricsStub, 10)
	meta := regexp.MustCompile(`<meta http-equiv="refresh" content="(\d+)">`)
	for _, tc := range []struct {
		query  string
		status int
		meta   string // the reload's seconds; "" for none
	}{
		{"", 200, "10"},
		{"?refresh=5", 200, "5"},
		{"?refresh=30s", 200, "30"},
		{"?refresh=1m", 200, "60"},
		{"?refresh=0", 200, ""},
		{"?refresh=3600", 200, "3600"},
		{"?refresh=3601", 400, ""},
		{"?refresh=-1", 400, ""},
		{"?refresh=1.5s", 400, ""},
		{"?refresh=soon", 400, ""},
	} {
		t.Run(tc.query, func(t *testing.T) {
			res, body := get(t, h, http.MethodGet, "/"+tc.query)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d\n%s", res.StatusCode, tc.status, body)
			}
			if tc.status != 200 {
				if !strings.Contains(body, "?refresh=") {
					t.Errorf("the error does not say what was wrong: %s", body)
				}
				return
			}
			got := ""
			if m := meta.FindStringSubmatch(body); m != nil {
				got = m[1]
			}
			if got != tc.meta {
				t.Errorf("reload every %q s, want %q", got, tc.meta)
			}
		})
	}
}

// TestServeRoutes checks what else the handler serves: /metrics, 404 for
// other paths, 405 for other methods, and a page that says why it could
// not read the locks.
func TestServeRoutes(t *testing.T) {
	t.Parallel()
	h := newServeHandler(fixed(serveFixture(time.Now()), nil), metricsStub, 0)
	if res, body := get(t, h, http.MethodGet, "/metrics"); res.StatusCode != 200 || body != "pgadvisory_up 1\n" {
		t.Errorf("/metrics: %d %q", res.StatusCode, body)
	}
	if res, _ := get(t, h, http.MethodGet, "/nothing"); res.StatusCode != http.StatusNotFound {
		t.Errorf("/nothing: %d, want 404", res.StatusCode)
	}
	if res, _ := get(t, h, http.MethodPost, "/"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", res.StatusCode)
	}
	if res, _ := get(t, h, http.MethodHead, "/"); res.StatusCode != 200 {
		t.Errorf("HEAD /: %d, want 200", res.StatusCode)
	}
	if res, body := get(t, h, http.MethodGet, "/"); res.StatusCode != 200 || strings.Contains(body, "http-equiv") {
		t.Errorf("with --refresh 0 the page reloads itself (%d)", res.StatusCode)
	}

	down := newServeHandler(fixed(lockState{Database: "app", Read: time.Now()}, errors.New(`connection refused <b>`)), metricsStub, 0)
	res, body := get(t, down, http.MethodGet, "/")
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `<p class="error" id="error">Cannot read the lock state: connection refused &lt;b&gt;</p>`) {
		t.Errorf("a failed read: %d\n%s", res.StatusCode, body)
	}
	if !strings.Contains(body, `id="no-locks"`) || !strings.Contains(body, `id="no-waits"`) {
		t.Errorf("a failed read shows locks:\n%s", body)
	}
}

// TestServeWaitGraphLayout checks the graph's layout: a chain goes left
// to right, column by column; a waiter blocked by two sessions stands
// right of both; a cycle is drawn, with its back edge marked.
func TestServeWaitGraphLayout(t *testing.T) {
	t.Parallel()
	k := advisory.Int64Key
	now := time.Now()
	type node struct{ pid, column int }
	for _, tc := range []struct {
		name  string
		locks []inspect.Lock
		nodes []node
		edges [][2]int
		back  int
	}{
		{"NoWaits", []inspect.Lock{{Key: k(1), Granted: true, PID: 1}}, nil, nil, 0},
		{
			"Chain",
			[]inspect.Lock{
				{Key: k(1), Granted: true, PID: 10},
				{Key: k(1), PID: 20, BlockedBy: []int{10}},
				{Key: k(2), Granted: true, PID: 20},
				{Key: k(2), PID: 30, BlockedBy: []int{20}},
			},
			[]node{{10, 0}, {20, 1}, {30, 2}}, [][2]int{{10, 20}, {20, 30}}, 0,
		},
		{
			"TwoBlockers",
			[]inspect.Lock{
				{Key: k(1), Shared: true, Granted: true, PID: 10},
				{Key: k(1), Shared: true, Granted: true, PID: 11},
				{Key: k(2), Granted: true, PID: 12},
				{Key: k(2), PID: 11, BlockedBy: []int{12}},
				{Key: k(1), PID: 20, BlockedBy: []int{11, 10}},
			},
			[]node{{10, 0}, {11, 1}, {12, 0}, {20, 2}}, [][2]int{{12, 11}, {10, 20}, {11, 20}}, 0,
		},
		{
			"Cycle",
			[]inspect.Lock{
				{Key: k(1), Granted: true, PID: 10},
				{Key: k(2), Granted: true, PID: 20},
				{Key: k(2), PID: 10, BlockedBy: []int{20}},
				{Key: k(1), PID: 20, BlockedBy: []int{10}},
			},
			[]node{{10, 1}, {20, 0}}, [][2]int{{20, 10}, {10, 20}}, 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := layoutWaitGraph(tc.locks, now)
			if tc.nodes == nil {
				if g != nil {
					t.Fatalf("a graph without waits: %+v", g)
				}
				return
			}
			if len(g.Nodes) != len(tc.nodes) {
				t.Fatalf("%d nodes, want %d: %+v", len(g.Nodes), len(tc.nodes), g.Nodes)
			}
			for i, n := range tc.nodes {
				got := g.Nodes[i]
				if got.PID != n.pid || got.X != graphMargin+n.column*(graphNodeWidth+graphColumnGap) {
					t.Errorf("node %d: pid %d at x %d, want pid %d in column %d", i, got.PID, got.X, n.pid, n.column)
				}
				if got.X+got.Width > g.Width || got.Y+got.Height > g.Height {
					t.Errorf("node %d outside the graph's %dx%d", got.PID, g.Width, g.Height)
				}
			}
			var edges [][2]int
			back := 0
			for _, e := range g.Edges {
				edges = append(edges, [2]int{e.Blocker, e.Waiter})
				if e.Back {
					back++
				}
			}
			if len(edges) != len(tc.edges) {
				t.Fatalf("edges %v, want %v", edges, tc.edges)
			}
			for i := range edges {
				if edges[i] != tc.edges[i] {
					t.Errorf("edges %v, want %v", edges, tc.edges)
					break
				}
			}
			if back != tc.back {
				t.Errorf("%d back edges, want %d", back, tc.back)
			}
		})
	}
}

// TestServeUsage checks serve's command line errors.
func TestServeUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "extra"}, `unexpected argument "extra"`},
		{[]string{"serve", "--refresh", "2h"}, "--refresh 2h0m0s: at most 1h0m0s"},
		{[]string{"serve", "--nope"}, "flag provided but not defined: -nope"},
	} {
		code, _, stderr := runInProcess(t, nil, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	code, stdout, _ := runInProcess(t, nil, "help", "serve")
	if code != 0 || !strings.HasPrefix(stdout, "usage: pgadvisory serve [--listen addr]") {
		t.Errorf("help serve: %d %q", code, stdout)
	}
}
