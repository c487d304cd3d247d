package pgtest

import (
	"slices"
	"testing"
)

func TestSplitImage(t *testing.T) {
	tests := []struct{ image, repo, tag string }{
		{"postgres:17", "postgres", "17"},
		{"postgres", "postgres", "latest"},
		{"pgadvisory/postgres:15", "pgadvisory/postgres", "15"},
		{"localhost:5000/pg", "localhost:5000/pg", "latest"},
		{"localhost:5000/pg:16", "localhost:5000/pg", "16"},
	}
	for _, tt := range tests {
		repo, tag := splitImage(tt.image)
		if repo != tt.repo || tag != tt.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tt.image, repo, tag, tt.repo, tt.tag)
		}
	}
}

func TestList(t *testing.T) {
	got := list(" a, ,b,")
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("list = %q", got)
	}
	if got := list(""); got != nil {
		t.Errorf("list(\"\") = %q", got)
	}
}

func TestName(t *testing.T) {
	servers := []*Server{{Version: 15}, {Version: 17}, {Version: 17}}
	name(servers)
	var got []string
	for _, s := range servers {
		got = append(got, s.Name)
	}
	if want := []string{"pg15", "pg17", "pg17-2"}; !slices.Equal(got, want) {
		t.Errorf("names = %q, want %q", got, want)
	}
}

func TestTrackStopsOnce(t *testing.T) {
	n := 0
	stop := track(func() { n++ })
	stop()
	stop()
	if n != 1 {
		t.Errorf("stopped %d times, want 1", n)
	}
}
