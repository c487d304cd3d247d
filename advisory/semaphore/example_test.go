package semaphore_test

import (
	"context"
	"database/sql"
	"errors"
	"log"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/semaphore"
)

// At most four encoders at once, across every process.
func ExampleSemaphore_Acquire() {
	var db *sql.DB // opened with a driver, as usual
	ctx := context.Background()
	s := semaphore.New(db, advisory.NameKey(2, "image-encoder"), 4)
	l, err := s.Acquire(ctx)
	if err != nil {
		log.Print(err)
		return
	}
	defer l.Release(context.WithoutCancel(ctx))
	encode(l.Context()) // cancelled if the slot is lost
}

func ExampleSemaphore_TryAcquire() {
	var db *sql.DB
	ctx := context.Background()
	s := semaphore.New(db, advisory.NameKey(2, "image-encoder"), 4)
	l, err := s.TryAcquire(ctx)
	if errors.Is(err, advisory.ErrNotAcquired) {
		log.Print("busy: try later")
		return
	} else if err != nil {
		log.Print(err)
		return
	}
	defer l.Release(context.WithoutCancel(ctx))
	encode(l.Context())
}

func encode(context.Context) {}
