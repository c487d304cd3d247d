package advisory

// Beats returns how many heartbeats have proved l, whose statement has
// ended, answered or not: its own, or its Locker connection's, each of
// which proves every lease on the connection. Tests count a heartbeat's
// round trips with it; it is -1 for a lease with no heartbeat of its own
// to count.
func Beats(l *Lease) int64 {
	if b, ok := l.l.(interface{ Beats() int64 }); ok {
		return b.Beats()
	}
	return -1
}
