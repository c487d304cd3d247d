package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// Each part of a program claims a namespace once, at start-up; a second
// claim to the same ID fails before any lock is taken.
func ExampleRegistry_Register() {
	var registry advisory.Registry
	inventory := registry.MustRegister(advisory.Namespace{
		ID: 100, Name: "inventory", Owner: "team-warehouse", Doc: "stock synchronisation jobs",
	})
	fmt.Println(inventory.NameKey("sync_inventory"))

	err := registry.Register(advisory.Namespace{ID: 100, Name: "reports", Owner: "team-bi"})
	fmt.Println(errors.Is(err, advisory.ErrNamespaceConflict))
	fmt.Println(err)

	ns, ok := registry.Lookup(advisory.PairKey(100, 7))
	fmt.Println(ns.Name, ok)
	_, err = registry.Resolve(advisory.Int64Key(42))
	fmt.Println(err)
	// Output:
	// 100:370782098
	// true
	// advisory: namespace conflict: ID 100 is already 100 "inventory" (owner team-warehouse); cannot register 100 "reports" (owner team-bi)
	// inventory true
	// advisory: no namespace: 42 is a bigint key; only pair keys belong to a namespace
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

	advisory.DefaultRegistry().MustRegister(advisory.Namespace{ID: 100, Name: "inventory", Owner: "team-warehouse"})
	if err := advisory.DefaultRegistry().Sync(ctx, db, advisory.SyncRegisteredBy("inventory-service")); err != nil {
		log.Fatal(err) // names both sides of every conflict
	}
}

// Inspect and WaitGraph explain the locks of a database in a log.
func ExampleInspect() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://localhost/app") // any driver
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	locks, err := advisory.Inspect(ctx, db, advisory.WithRegistry(advisory.DefaultRegistry()))
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range locks {
		log.Print(l)
	}
	if g := advisory.WaitGraph(locks); g != "" {
		log.Printf("advisory lock waits:\n%s", g)
	}
}

func ExampleWaitGraph() {
	key := advisory.NameKey(100, "sync_inventory")
	locks := []advisory.LockInfo{
		{Key: key, Namespace: "inventory", Granted: true, PID: 4242, ApplicationName: "inventory-sync"},
		{Key: key, Namespace: "inventory", PID: 4243, ApplicationName: "psql", Waited: 12 * time.Second, BlockedBy: []int{4242}},
	}
	fmt.Print(advisory.WaitGraph(locks))
	// Output:
	// pid 4242 (inventory-sync): holds exclusive 100:370782098 [inventory]
	//   blocks pid 4243 (psql): waits 12s for exclusive 100:370782098 [inventory]
}
