package sqltext

import (
	"strconv"
	"strings"
	"testing"
)

// TestTokenLayoutText checks that the numbers nextToken spells out in SQL
// are the layout's constants, and that the layout fits an int64 with room
// for 2^40 counters.
func TestTokenLayoutText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, text string
		want       int64
	}{
		{"counterBits", counterBits, tokenCounterBits},
		{"maxCounter", maxCounter, maxTokenCounter},
		{"maxTimeline", maxTimeline, maxTokenTimeline},
	} {
		if c.text != strconv.FormatInt(c.want, 10) {
			t.Errorf("%s = %s, want %d", c.name, c.text, c.want)
		}
	}
	if tokenCounterBits < 40 {
		t.Errorf("tokenCounterBits = %d; want room for at least 2^40 tokens per timeline", tokenCounterBits)
	}
	if top := uint64(maxTokenTimeline)<<tokenCounterBits | maxTokenCounter; top != 1<<63-1 {
		t.Errorf("the greatest token is %#x; want the greatest int64", top)
	}
}

// TestNextTokenOrder checks that nextToken sets synchronous_commit
// before it draws the counter, in one statement.
func TestNextTokenOrder(t *testing.T) {
	t.Parallel()
	set := strings.Index(nextToken, "pg_catalog.set_config('synchronous_commit'")
	draw := strings.Index(nextToken, "pg_catalog.nextval(")
	if set < 0 || draw < 0 || set > draw {
		t.Errorf("nextToken does not set synchronous_commit before nextval: %s", nextToken)
	}
	if strings.Contains(nextToken, ";") {
		t.Errorf("nextToken is more than one expression: %s", nextToken)
	}
}
