package migratelock_test

import (
	"database/sql"
	"errors"
	"log"
	"os"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database/postgres"
	_ "github.com/golang-migrate/migrate/v4/source/file"
	_ "github.com/lib/pq"

	"github.com/pgadvisory/pgadvisory/integrations/migratelock"
)

// Every instance of a service runs its migrations at start-up: the first
// to get the lease applies them, the others wait up to five minutes and
// then find nothing to do. A loss of the lease stops migrate before its
// next migration.
func ExampleWithInstance() {
	db, err := sql.Open("postgres", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	inner, err := postgres.WithInstance(db, &postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	var m *migrate.Migrate
	drv, err := migratelock.WithInstance(inner, db, &migratelock.Config{
		Key:         migratelock.PostgresKey("app", "public", "schema_migrations"),
		LockTimeout: 5 * time.Minute,
		Heartbeat:   2 * time.Second,
		OnLoss: func(err error) {
			log.Print(err)
			select {
			case m.GracefulStop <- true:
			default:
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	m, err = migrate.NewWithDatabaseInstance("file://migrations", "postgres", drv)
	if err != nil {
		log.Fatal(err)
	}
	m.LockTimeout = 6 * time.Minute // above the Config's: the Driver gives up first, holding nothing
	defer m.Close()

	switch err := m.Up(); {
	case errors.Is(err, migrate.ErrNoChange):
		log.Print("nothing to migrate")
	case err != nil:
		log.Fatal(err)
	}
}
