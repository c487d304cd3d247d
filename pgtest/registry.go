package pgtest

import "sync"

// running holds how to stop every server this process started and has not
// stopped yet, so that [Main] and its signal handler can stop them.
var running struct {
	mu      sync.Mutex
	next    int
	stops   map[int]func()
	stopped bool // after stopAll, a server that comes up late stops at once

	stopping sync.Mutex // held for the whole of stopAll
}

// track registers stop, which stops one server, and returns a function that
// stops it once and forgets it. The function is safe to call more than once.
func track(stop func()) func() {
	var once sync.Once
	do := func() { once.Do(stop) }
	running.mu.Lock()
	if running.stopped {
		running.mu.Unlock()
		do()
		return do
	}
	if running.stops == nil {
		running.stops = make(map[int]func())
	}
	id := running.next
	running.next++
	running.stops[id] = do
	running.mu.Unlock()
	return func() {
		running.mu.Lock()
		delete(running.stops, id)
		running.mu.Unlock()
		do()
	}
}

// stopAll stops every tracked server, concurrently, and returns when all
// have stopped, also when another call is already stopping them.
func stopAll() {
	running.stopping.Lock()
	defer running.stopping.Unlock()
	running.mu.Lock()
	stops := running.stops
	running.stops = nil
	running.stopped = true
	running.mu.Unlock()
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Go(stop)
	}
	wg.Wait()
}
