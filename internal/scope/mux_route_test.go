package scope

import "testing"

func TestRoute(t *testing.T) {
	t.Parallel()
	full := KeysPerCarrier
	for _, tc := range []struct {
		name     string
		carriers []carrierLoad
		opening  int
		max      int
		best     int
		open     bool
	}{
		{"NoneOpens", nil, 0, 4, -1, true},
		{"NoneAtMaxWaits", nil, 1, 1, -1, false},
		{"NoneOpeningOpensFew", nil, 3, 100, -1, true},
		{"NoneOpeningFourWaits", nil, 4, 100, -1, false},
		{"IdleEmptyTaken", []carrierLoad{{0, 0}}, 0, 4, 0, false},
		{"FirstFewSpread", []carrierLoad{{0, 1}}, 0, 4, 0, true},
		{"SpreadCountsOpening", []carrierLoad{{0, 1}, {0, 1}}, 2, 8, 0, false},
		{"SpreadStopsAtFour", []carrierLoad{{0, 1}, {0, 2}, {0, 3}, {0, 4}}, 0, 100, 0, false},
		{"BusyFewOpens", []carrierLoad{{1, 0}, {2, 5}, {1, 0}}, 0, 100, 0, true},
		{"BusyFourRoomyQueue", []carrierLoad{{1, 0}, {2, 5}, {1, 0}, {1, 0}}, 0, 100, 0, false},
		{"BusyFewRoomyOpens", []carrierLoad{{0, full}, {1, 10}, {0, full}, {1, 20}, {2, 30}}, 0, 100, 1, true},
		{"BusyRoomyCountsOpening", []carrierLoad{{0, full}, {1, 10}, {0, full}, {1, 20}, {2, 30}}, 1, 100, 1, false},
		{"BusyAtMaxTakesLeastBusy", []carrierLoad{{2, 0}, {1, 9}, {1, 3}}, 0, 3, 2, false},
		{"FullOpens", []carrierLoad{{0, full}, {0, full}, {0, full + 1}, {0, full}}, 0, 100, 0, true},
		{"FullOpensFew", []carrierLoad{{0, full}, {0, full}}, 3, 100, 0, true},
		{"FullFourOpeningWait", []carrierLoad{{0, full}, {0, full}}, 4, 100, -1, false},
		{"OneRoomyTaken", []carrierLoad{{0, full}, {0, full}, {0, full - 1}, {0, full}}, 0, 100, 2, false},
		{"RoomyBeforeIdle", []carrierLoad{{0, full}, {1, 10}, {0, full}, {0, full}}, 0, 100, 1, true},
		{"RoomyBeforeIdleAtMax", []carrierLoad{{0, full}, {1, 10}, {0, full}, {0, full}}, 0, 4, 1, false},
		{"FullAtMaxSpreads", []carrierLoad{{0, 3 * full}, {0, 2 * full}}, 0, 2, 1, false},
		{"DefaultMaxAsBefore", []carrierLoad{{0, 1}, {0, 1}, {0, 1}}, 0, DefaultMaxConns, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			best, open := route(len(tc.carriers), func(i int) carrierLoad { return tc.carriers[i] }, tc.opening, tc.max, KeysPerCarrier)
			if best != tc.best || open != tc.open {
				t.Fatalf("route = %d, %v; want %d, %v", best, open, tc.best, tc.open)
			}
		})
	}
}
