package inspect_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/inspect"
)

// Helpers that build the Lock values Locks would return.
func wgHeld(pid int, app string, k advisory.Key) inspect.Lock {
	return inspect.Lock{Key: k, Granted: true, PID: pid, ApplicationName: app}
}

func wgHeldShared(pid int, k advisory.Key) inspect.Lock {
	l := wgHeld(pid, "", k)
	l.Shared = true
	return l
}

func wgWaiting(pid int, app string, k advisory.Key, d time.Duration, by ...int) inspect.Lock {
	return inspect.Lock{Key: k, PID: pid, ApplicationName: app, Waited: d, BlockedBy: by}
}

func TestWaitGraph(t *testing.T) {
	t.Parallel()
	k71 := advisory.PairKey(7, 1)
	k79 := advisory.PairKey(7, 9)
	k42 := advisory.Int64Key(42)
	tests := []struct {
		name  string
		locks []inspect.Lock
		want  string
	}{
		{name: "Empty"},
		{name: "NoWaiters", locks: []inspect.Lock{wgHeld(1, "a", k71), wgHeld(2, "b", k42)}},
		{
			name: "Chain",
			locks: []inspect.Lock{
				func() inspect.Lock { l := wgHeld(4242, "billing-api", k71); l.Namespace = "billing"; return l }(),
				func() inspect.Lock {
					l := wgWaiting(4243, "billing-worker", k71, 1500*time.Millisecond, 4242)
					l.Namespace = "billing"
					return l
				}(),
				wgHeld(4243, "billing-worker", k79),
				func() inspect.Lock {
					l := wgWaiting(4250, "report", k79, 200*time.Millisecond, 4243)
					l.Shared = true
					return l
				}(),
				wgHeld(4300, "idle", k42), // blocks no one: not shown
			},
			want: "" +
				"pid 4242 (billing-api): holds exclusive 7:1 [billing]\n" +
				"  blocks pid 4243 (billing-worker): waits 1.5s for exclusive 7:1 [billing]; holds exclusive 7:9\n" +
				"    blocks pid 4250 (report): waits 200ms for shared 7:9\n",
		},
		{
			name: "SharedHoldersBlockOneWriter",
			locks: []inspect.Lock{
				wgHeldShared(30, k42), wgHeldShared(10, k42), wgHeldShared(20, k42),
				wgWaiting(40, "", k42, 3*time.Second, 10, 20, 30),
			},
			want: "" +
				"pid 10: holds shared 42\n" +
				"  blocks pid 40: waits 3s for exclusive 42\n" +
				"pid 20: holds shared 42\n" +
				"  blocks pid 40 (see above)\n" +
				"pid 30: holds shared 42\n" +
				"  blocks pid 40 (see above)\n",
		},
		{
			name: "QueueBehindWaiter",
			// 3 waits behind 2, which waits for 1: the server lists both
			// 1 and 2 as blocking 3.
			locks: []inspect.Lock{
				wgHeld(1, "", k42),
				wgWaiting(2, "", k42, time.Second, 1),
				wgWaiting(3, "", k42, 0, 1, 2),
			},
			want: "" +
				"pid 1: holds exclusive 42\n" +
				"  blocks pid 2: waits 1s for exclusive 42\n" +
				"    blocks pid 3: waits for exclusive 42\n" +
				"  blocks pid 3 (see above)\n",
		},
		{
			name: "Cycle",
			locks: []inspect.Lock{
				wgHeld(5, "", k71), wgWaiting(5, "", k42, time.Second, 6),
				wgHeld(6, "", k42), wgWaiting(6, "", k71, 2*time.Second, 5),
			},
			want: "" +
				"pid 5: waits 1s for exclusive 42; holds exclusive 7:1\n" +
				"  blocks pid 6: waits 2s for exclusive 7:1; holds exclusive 42\n" +
				"    blocks pid 5 (cycle)\n",
		},
		{
			name: "BlockerNotInLocks",
			// The blocker was filtered out of the snapshot, or holds
			// nothing the caller can see.
			locks: []inspect.Lock{wgWaiting(8, "job", k42, time.Second, 99)},
			want: "" +
				"pid 99\n" +
				"  blocks pid 8 (job): waits 1s for exclusive 42\n",
		},
		{
			name:  "UnknownBlocker",
			locks: []inspect.Lock{wgWaiting(8, "", k42, time.Second)},
			want:  "pid 8: waits 1s for exclusive 42\n",
		},
		{
			name: "PreparedTransaction",
			locks: []inspect.Lock{
				{Key: k42, Granted: true},
				wgWaiting(8, "", k42, time.Minute, 0),
			},
			want: "" +
				"prepared transaction: holds exclusive 42\n" +
				"  blocks pid 8: waits 1m0s for exclusive 42\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := inspect.WaitGraph(tt.locks); got != tt.want {
				t.Errorf("WaitGraph =\n%s\nwant\n%s", got, tt.want)
			}
			// The input's order does not matter.
			shuffled := slices.Clone(tt.locks)
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if got := inspect.WaitGraph(shuffled); got != tt.want {
				t.Errorf("WaitGraph of shuffled locks =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
