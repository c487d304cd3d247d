package advisory_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// misplaced are calls with an option that cannot apply to them, each of
// which must fail to compile.
var misplaced = map[string]string{
	"TxOptionsOnACallersTx":  `advisory.WithXactLockTx(ctx, tx, k, xfn, advisory.TxOptions(nil))`,
	"HeartbeatOnXact":        `advisory.WithXactLock(ctx, db, k, xfn, advisory.Heartbeat(time.Second))`,
	"FencingOnXact":          `advisory.WithXactLock(ctx, db, k, xfn, advisory.Fencing())`,
	"FencingOnSession":       `advisory.WithSessionLock(ctx, db, k, sfn, advisory.Fencing())`,
	"TxOptionsOnSession":     `advisory.WithSessionLockConn(ctx, conn, k, sfn, advisory.TxOptions(nil))`,
	"TxOptionsOnAcquire":     `advisory.Acquire(ctx, db, k, advisory.TxOptions(nil))`,
	"HeartbeatOnLockerLease": `lk.Acquire(ctx, k, advisory.Heartbeat(time.Second))`,
	"TxOptionsOnLockerLease": `lk.Acquire(ctx, k, advisory.TxOptions(nil))`,
}

// placed are calls with options that apply, which must compile.
var placed = []string{
	`advisory.WithXactLock(ctx, db, k, xfn, advisory.Try(), advisory.Wait(time.Second), advisory.WaitSlice(time.Second), advisory.Shared(), advisory.WithObserver(nil), advisory.TxOptions(nil))`,
	`advisory.WithXactLockTx(ctx, tx, k, xfn, advisory.Try(), advisory.Wait(time.Second), advisory.WaitSlice(time.Second), advisory.Shared(), advisory.WithObserver(nil))`,
	`advisory.WithSessionLock(ctx, db, k, sfn, advisory.Try(), advisory.Wait(time.Second), advisory.Shared(), advisory.Heartbeat(time.Second))`,
	`advisory.WithSessionLockConn(ctx, conn, k, sfn, advisory.Wait(time.Second), advisory.Heartbeat(time.Second))`,
	`advisory.Acquire(ctx, db, k, advisory.Try(), advisory.Wait(time.Second), advisory.Shared(), advisory.Heartbeat(time.Second), advisory.Fencing())`,
	`lk.Acquire(ctx, k, advisory.Try(), advisory.Wait(time.Second), advisory.Shared(), advisory.Fencing())`,
}

// TestOptionsCompileOnlyWhereTheyApply builds calls with each option in
// each place, through go build with an overlay: a call with an option that
// cannot apply to it does not compile, and one whose options all apply
// does.
func TestOptionsCompileOnlyWhereTheyApply(t *testing.T) {
	t.Parallel()
	build := func(t *testing.T, call string) (string, error) {
		t.Helper()
		src := `package compilecheck

import (
	"context"
	"database/sql"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

var _ = time.Second

func f(ctx context.Context, db *sql.DB, tx *sql.Tx, conn *sql.Conn, lk *advisory.Locker, k advisory.Key,
	xfn func(context.Context, *sql.Tx) error, sfn func(context.Context, *sql.Conn) error) {
	_ = ` + call + `
}
`
		if strings.HasPrefix(call, "advisory.Acquire") || strings.HasPrefix(call, "lk.Acquire") {
			src = strings.Replace(src, "\t_ = "+call, "\t_, _ = "+call, 1)
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "f.go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		// A package that does not exist in the tree, made of the file.
		pkgDir := filepath.Join(wd, "compilecheck_overlay")
		overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkgDir, "f.go"): file}})
		if err != nil {
			t.Fatal(err)
		}
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "build", "-overlay", ov, "-o", os.DevNull, "./compilecheck_overlay")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for name, call := range misplaced {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := build(t, call)
			if err == nil {
				t.Fatalf("%s compiles; want a type error", call)
			}
			if !strings.Contains(out, "does not implement") && !strings.Contains(out, "cannot use") {
				t.Fatalf("%s: not a type error:\n%s", call, out)
			}
		})
	}
	for _, call := range placed {
		t.Run("Placed", func(t *testing.T) {
			t.Parallel()
			if out, err := build(t, call); err != nil {
				t.Fatalf("%s does not compile: %v\n%s", call, err, out)
			}
		})
	}
}
