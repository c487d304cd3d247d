package advisory_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// BenchmarkWatch measures what the watchdog over a statement (scope.Watch)
// costs on the path that needs it not: a session that answers, under a
// context with a deadline. "watch" is the watchdog alone, armed and
// stopped on a *sql.Conn; "trylock" is an uncontended TryLock and its
// unlock, each a statement that arms one, for scale. On lib/pq the
// watchdog reads the driver's socket through Raw and registers a
// context.AfterFunc; on pgx it stops at the type check. docs/concepts.md
// records the figures.
func BenchmarkWatch(b *testing.B) {
	for _, s := range pgtest.Servers(b) {
		for _, d := range pgtest.Drivers {
			b.Run(s.Name+"/"+d, func(b *testing.B) {
				db := s.Open(b, d)
				conn := pgtest.Conn(b, db)
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				b.Run("watch", func(b *testing.B) {
					b.ReportAllocs()
					for range b.N {
						scope.Watch(ctx, conn)()
					}
				})
				b.Run("trylock", func(b *testing.B) {
					key := advisory.Int64Key(0x7f23_0000_0000_0000 | int64(s.Version))
					b.ReportAllocs()
					for range b.N {
						if ok, err := advisory.TryLock(ctx, conn, key); err != nil || !ok {
							b.Fatal(ok, err)
						}
						if err := advisory.Unlock(ctx, conn, key); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}
