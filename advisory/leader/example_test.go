package leader_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/leader"
)

// A scheduler that runs in every replica and acts only while it leads.
func ExampleRun() {
	var db *sql.DB // opened with a driver, as usual
	ctx := context.Background()
	key := advisory.NameKey(1, "scheduler")
	err := leader.Run(ctx, db, key, func(ctx context.Context, l *advisory.Lease) error {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil // lost the lead, or shutting down
			case <-t.C:
				log.Printf("leader %d schedules", l.Token()) // writes carry l.Token()
			}
		}
	}, leader.Heartbeat(2*time.Second), leader.Fencing())
	log.Print(err)
}

func ExampleCurrent() {
	var db *sql.DB
	info, ok, err := leader.Current(context.Background(), db, advisory.NameKey(1, "scheduler"))
	switch {
	case err != nil:
		log.Print(err)
	case !ok:
		log.Print("nobody leads")
	default:
		log.Printf("%s leads, for at most %v", info, info.Since())
	}
}
