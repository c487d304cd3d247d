package docsnippets

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// snippet is one Go code block of a Markdown file.
type snippet struct {
	file string // the Markdown file, relative to the module's root
	line int    // the line of the block's first line of code, from 1
	code string // the block's lines, without the fences or their indentation
	skip string // the reason a skip marker gives; empty when the block is built
}

// pos is where the snippet is, for messages.
func (s snippet) pos() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

var (
	// goFence opens a Go block, possibly indented (inside a list item).
	goFence = regexp.MustCompile("^([ \t]*)(`{3,})go[ \t]*$")
	// openFence opens a block of any language.
	openFence = regexp.MustCompile("^[ \t]*(`{3,})")
	// closeFence closes a block: a run of backticks at least as long as
	// the one that opened it, alone on its line.
	closeFence = regexp.MustCompile("^[ \t]*(`{3,})[ \t]*$")
	// skipMarker marks the block whose fence follows it as not Go.
	skipMarker = regexp.MustCompile(`^<!-- snippet: skip \((.*)\) -->$`)
	// anyMarker is a marker, well formed or not.
	anyMarker = regexp.MustCompile(`^<!--\s*snippet\b`)
)

// extract returns the Go blocks of the Markdown text of file. A skip marker
// applies to the block whose fence is the next non-blank line; a marker
// without a reason, or with no Go block after it, is an error, as is a block
// that is never closed.
func extract(file, text string) ([]snippet, error) {
	lines := strings.Split(text, "\n")
	var out []snippet
	var errs []string
	pending, pendingLine := "", 0 // the reason of a marker not yet used
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if anyMarker.MatchString(l) {
			m := skipMarker.FindStringSubmatch(l)
			if m == nil || strings.TrimSpace(m[1]) == "" {
				errs = append(errs, fmt.Sprintf("%s:%d: malformed marker %q; want <!-- snippet: skip (reason) -->", file, i+1, l))
				continue
			}
			pending, pendingLine = m[1], i+1
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		fence := goFence.FindStringSubmatch(l)
		if pending != "" && fence == nil {
			errs = append(errs, fmt.Sprintf("%s:%d: skip marker not followed by a Go block", file, pendingLine))
			pending = ""
		}
		if fence == nil {
			if m := openFence.FindStringSubmatch(l); m != nil { // another language's block: pass over it
				for i++; i < len(lines) && !closes(lines[i], m[1]); i++ {
				}
			}
			continue
		}
		indent, ticks, start := fence[1], fence[2], i+1
		var code []string
		closed := false
		for i++; i < len(lines); i++ {
			if closes(lines[i], ticks) {
				closed = true
				break
			}
			code = append(code, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			errs = append(errs, fmt.Sprintf("%s:%d: Go block never closed", file, start))
			break
		}
		out = append(out, snippet{file: file, line: start + 1, code: strings.Join(code, "\n"), skip: pending})
		pending = ""
	}
	if pending != "" {
		errs = append(errs, fmt.Sprintf("%s:%d: skip marker not followed by a Go block", file, pendingLine))
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// closes reports whether line closes a block that the backticks open
// opened.
func closes(line, open string) bool {
	m := closeFence.FindStringSubmatch(line)
	return m != nil && len(m[1]) >= len(open)
}

func TestExtract(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		want    []snippet
		wantErr string
	}{
		{
			name: "Blocks",
			text: "# T\n\n```go\nx := 1\n```\n\n```sh\ngo test\n```\n\n- item\n\n  ```go\n  y := 2\n  ```\n",
			want: []snippet{{file: "f.md", line: 4, code: "x := 1"}, {file: "f.md", line: 14, code: "y := 2"}},
		},
		{
			name: "OtherLanguageHoldsAFenceLikeLine",
			text: "````md\n```go\n````\n",
			want: nil,
		},
		{
			name: "Skip",
			text: "<!-- snippet: skip (pseudo-code) -->\n\n```go\nfor each job\n```\n```go\nz := 3\n```\n",
			want: []snippet{{file: "f.md", line: 4, code: "for each job", skip: "pseudo-code"}, {file: "f.md", line: 7, code: "z := 3"}},
		},
		{
			name:    "SkipWithoutReason",
			text:    "<!-- snippet: skip () -->\n```go\nx\n```\n",
			wantErr: "f.md:1: malformed marker",
		},
		{
			name:    "MarkerMisspelt",
			text:    "<!-- snippet: skipped (x) -->\n```go\nx\n```\n",
			wantErr: "f.md:1: malformed marker",
		},
		{
			name:    "SkipBeforeProse",
			text:    "<!-- snippet: skip (output) -->\nSome text.\n```go\nx\n```\n",
			wantErr: "f.md:1: skip marker not followed by a Go block",
		},
		{
			name:    "SkipBeforeShell",
			text:    "<!-- snippet: skip (output) -->\n```sh\nx\n```\n",
			wantErr: "f.md:1: skip marker not followed by a Go block",
		},
		{
			name:    "Unclosed",
			text:    "```go\nx := 1\n",
			wantErr: "f.md:1: Go block never closed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := extract("f.md", tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("extract: error %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("extract = %+v; want %+v", got, tt.want)
			}
		})
	}
}
