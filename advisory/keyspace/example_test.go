package keyspace_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// Each part of a program claims a namespace once, at start-up; a second
// claim to the same ID fails before any lock is taken.
func ExampleRegistry_Register() {
	var registry keyspace.Registry
	inventory := registry.MustRegister(advisory.Namespace{
		ID: 100, Name: "inventory", Owner: "team-warehouse", Doc: "stock synchronisation jobs",
	})
	fmt.Println(inventory.NameKey("sync_inventory"))

	err := registry.Register(advisory.Namespace{ID: 100, Name: "reports", Owner: "team-bi"})
	fmt.Println(errors.Is(err, keyspace.ErrConflict))
	fmt.Println(err)

	ns, ok := registry.Lookup(advisory.PairKey(100, 7))
	fmt.Println(ns.Name, ok)
	_, err = registry.Resolve(advisory.Int64Key(42))
	fmt.Println(err)
	// Output:
	// 100:370782098
	// true
	// keyspace: namespace conflict: ID 100 is already 100 "inventory" (owner team-warehouse); cannot register 100 "reports" (owner team-bi)
	// inventory true
	// keyspace: no namespace: 42 is a bigint key; only pair keys belong to a namespace
}

// Packages of one program register their namespaces in the process-wide
// registry, as package-level variables, and take their keys from them.
func ExampleDefault() {
	var billing = keyspace.Default().MustRegister(advisory.Namespace{
		ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs",
	})
	fmt.Println(billing.Key(1), billing.NameKey("nightly"))
	ns, _ := keyspace.Default().Lookup(billing.Key(1))
	fmt.Println(ns.Owner)
	// Output:
	// 7:1 7:2091003772
	// team-payments
}

// Sync records the program's namespaces in the shared dictionary table
// when it starts, and fails if another service claimed one of them.
func ExampleRegistry_Sync() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://localhost/app") // any driver
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	keyspace.Default().MustRegister(advisory.Namespace{ID: 100, Name: "inventory", Owner: "team-warehouse"})
	if err := keyspace.Default().Sync(ctx, db, keyspace.RegisteredBy("inventory-service")); err != nil {
		log.Fatal(err) // names both sides of every conflict
	}
}
