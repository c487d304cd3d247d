package sqltext

import (
	"strings"
	"testing"
)

// TestAnyGuard: under Guarded, TryAny and WaitAny are a semaphore's
// statements; under a lease's own mark they refuse only another mark.
func TestAnyGuard(t *testing.T) {
	keys := []Key{{Pair: true, A: 7, B: 2}, {Pair: true, A: 7, B: -3}}
	for _, f := range []Form{Inline, Params} {
		if got, want := TryAny(f, Guarded, keys), SlotTry(f, keys); got.Query != want.Query {
			t.Errorf("form %d: TryAny under Guarded:\n got %s\nwant %s", f, got.Query, want.Query)
		}
		if got, want := WaitAny(f, Guarded, keys, 20), SlotWait(f, keys, 20); got.Query != want.Query {
			t.Errorf("form %d: WaitAny under Guarded:\n got %s\nwant %s", f, got.Query, want.Query)
		}
		own := " AND pg_catalog.current_setting('pgadvisory.lease', true) <> '8177' THEN -3"
		for name, stmt := range map[string]Stmt{
			"TryAny":  TryAny(f, OwnMark(8177), keys),
			"WaitAny": WaitAny(f, OwnMark(8177), keys, 20),
		} {
			if !strings.Contains(stmt.Query, marked+own) {
				t.Errorf("form %d: %s under OwnMark: %s\nlacks %s", f, name, stmt.Query, own)
			}
		}
	}
}
