package advisoryprom_test

import (
	"database/sql"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/integrations/advisoryprom"
)

// A collector on a registry of its own, served at /metrics, naming the
// namespaces that the program registered.
func ExampleNewCollector() {
	db, err := sql.Open("pgx", "postgres://localhost/app") // any driver
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(advisoryprom.NewCollector(db,
		advisoryprom.WithRegistry(keyspace.Default()),
		advisoryprom.OnError(func(err error) { log.Print(err) }),
	))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	log.Fatal(http.ListenAndServe("localhost:9187", nil))
}
