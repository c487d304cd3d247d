package advisoryotel_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/integrations/advisoryotel"
)

// billing is a namespace of the program's, registered at start-up: the
// observer names it in pgadvisory.lock.namespace.
var billing = keyspace.Default().MustRegister(advisory.Namespace{
	ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs",
})

// A program that has set up OpenTelemetry's global providers installs the
// observer once, at start-up: from then on every lock function, scoped
// helper and lease is traced and measured. The lock's span is a child of
// the caller's.
func Example() {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	obs, err := advisoryotel.New(advisoryotel.WithRegistry(keyspace.Default()))
	if err != nil {
		log.Fatal(err)
	}
	advisory.SetObserver(obs)

	ctx, span := otel.Tracer("example.com/billing").Start(context.Background(), "nightly invoices")
	defer span.End()
	err = advisory.WithXactLock(ctx, db, billing.NameKey("nightly"), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE invoices SET state = 'sent' WHERE state = 'due'")
		return err
	}, advisory.Try())
	if err != nil {
		log.Print(err)
	}
}

// An observer can record with providers of its own instead of the global
// ones, and observe only the scopes and leases given it with
// advisory.WithObserver.
func ExampleNew_providers() {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// A real program adds its exporters: sdktrace.WithBatcher, and a
	// periodic or pull reader for the meter provider.
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())

	obs, err := advisoryotel.New(
		advisoryotel.WithTracerProvider(tp),
		advisoryotel.WithMeterProvider(mp),
		advisoryotel.WithRegistry(keyspace.Default()),
	)
	if err != nil {
		log.Fatal(err)
	}
	lease, err := advisory.Acquire(context.Background(), db, billing.NameKey("ledger"), advisory.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())
	// Work under the lease's context, which ends if the lease is lost.
	if _, err := db.ExecContext(lease.Context(), "CALL billing.post_ledger()"); err != nil {
		log.Print(err)
	}
}
