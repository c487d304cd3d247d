package inspect_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/inspect"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// Locks and WaitGraph explain the locks of a database in a log.
func ExampleLocks() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://localhost/app") // any driver
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	locks, err := inspect.Locks(ctx, db, inspect.WithRegistry(keyspace.Default()))
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range locks {
		log.Print(l)
	}
	if g := inspect.WaitGraph(locks); g != "" {
		log.Printf("advisory lock waits:\n%s", g)
	}
}

func ExampleWaitGraph() {
	key := advisory.NameKey(100, "sync_inventory")
	locks := []inspect.Lock{
		{Key: key, Namespace: "inventory", Granted: true, PID: 4242, ApplicationName: "inventory-sync"},
		{Key: key, Namespace: "inventory", PID: 4243, ApplicationName: "psql", Waited: 12 * time.Second, BlockedBy: []int{4242}},
	}
	fmt.Print(inspect.WaitGraph(locks))
	// Output:
	// pid 4242 (inventory-sync): holds exclusive 100:370782098 [inventory]
	//   blocks pid 4243 (psql): waits 12s for exclusive 100:370782098 [inventory]
}

// DecodeKey reads a key from the columns of pg_locks, as a query of one's
// own returns them.
func ExampleDecodeKey() {
	// SELECT classid, objid, objsubid FROM pg_locks WHERE locktype = 'advisory'
	for _, row := range []struct {
		classid, objid uint32
		objsubid       int16
	}{{0, 42, 1}, {1, 2, 1}, {1, 2, 2}, {100, 370782098, 2}} {
		k, err := inspect.DecodeKey(row.classid, row.objid, row.objsubid)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(k)
	}
	// Output:
	// 42
	// 4294967298
	// 1:2
	// 100:370782098
}
