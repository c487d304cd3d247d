package docsnippets

const module = "github.com/pgadvisory/pgadvisory"

// genDir is the directory, relative to this package's, under which the
// generated packages are laid out through the build's overlay. It does not
// exist on disk.
const genDir = "gen"

// packages maps the package names a snippet may use without importing them
// to their import paths. A snippet's own import declarations come first.
var packages = map[string]string{
	"context": "context",
	"errors":  "errors",
	"fmt":     "fmt",
	"http":    "net/http",
	"log":     "log",
	"os":      "os",
	"slog":    "log/slog",
	"sql":     "database/sql",
	"testing": "testing",
	"time":    "time",
	"url":     "net/url",

	"advisory":    module + "/advisory",
	"grpclock":    module + "/middleware/grpclock",
	"httplock":    module + "/middleware/httplock",
	"idempotency": module + "/advisory/idempotency",
	"inspect":     module + "/advisory/inspect",
	"keyspace":    module + "/advisory/keyspace",
	"leader":      module + "/advisory/leader",
	"mock":        module + "/mock",
	"pgtest":      module + "/pgtest",
	"semaphore":   module + "/advisory/semaphore",
	"sqlxlock":    module + "/sqlxlock",

	"chi":        "github.com/go-chi/chi/v5",
	"codes":      "google.golang.org/grpc/codes",
	"grpc":       "google.golang.org/grpc",
	"middleware": "github.com/go-chi/chi/v5/middleware",
	"mux":        "github.com/gorilla/mux",
	"sqlmock":    "github.com/DATA-DOG/go-sqlmock",
	"sqlx":       "github.com/jmoiron/sqlx",
	"status":     "google.golang.org/grpc/status",

	// pb stands for a service's generated protobuf code.
	"pb": module + "/internal/docsnippets/" + genDir + "/pb",
}

// pbSource is the stand-in for generated protobuf code.
const pbSource = `// Package pb stands for a service's generated protobuf code.
package pb

// PayRequest asks to pay an order.
type PayRequest struct{ OrderId int32 }

// GetOrderId returns the order's id.
func (r *PayRequest) GetOrderId() int32 { return r.OrderId }

// PayResponse answers a PayRequest.
type PayResponse struct{}
`

// common holds the declarations a snippet may use without declaring
// them: what the reader's program has at hand (a context, a database, a
// connection, a transaction, a key), the namespaces the docs use, and
// stand-ins for the reader's own code. A generated package gets the ones
// its snippet uses, and those they use in turn. Each is named by the name it
// declares.
var common = map[string]string{
	// What a program has at hand.
	"ctx":    `var ctx context.Context`,
	"db":     `var db *sql.DB`,
	"conn":   `var conn *sql.Conn`,
	"tx":     `var tx *sql.Tx`,
	"key":    `var key advisory.Key`,
	"t":      `var t *testing.T`,
	"m":      `var m sqlmock.Sqlmock`,
	"testDB": `var testDB *sql.DB`,
	"stream": `var stream grpc.BidiStreamingServer[pb.PayRequest, pb.PayResponse]`,

	// Namespaces: the first half of the docs' pair keys.
	"jobsNS":       `const jobsNS = 1`,
	"migrationsNS": `const migrationsNS = 2`,
	"acctNS":       `const acctNS = 3`,
	"ordersNS":     `const ordersNS = 4`,
	"tenantsNS":    `const tenantsNS = 5`,
	"docsNS":       `const docsNS = 6`,
	"tenants":      `const tenants = 7`,

	// The values the docs' keys are made of.
	"id":          `var id int32`,
	"from":        `var from int32`,
	"to":          `var to int32`,
	"warehouseID": `var warehouseID int64`,
	"orderRef":    `var orderRef string`,
	"tenantID":    `var tenantID string`,
	"msg":         `var msg struct{ ID string; Amount, Account int64 }`,

	// The reader's own code.
	"steps":        `var steps []string`,
	"apply":        `func apply(ctx context.Context, on, step any) error { return nil }`,
	"migrate":      `func migrate(ctx context.Context, conn *sql.Conn) error { return nil }`,
	"runJob":       `func runJob(ctx context.Context, tx *sql.Tx, id int32) error { return nil }`,
	"runScheduler": `func runScheduler(ctx context.Context, token int64) error { return nil }`,
	"work":         `func work(ctx context.Context, token int64) error { return nil }`,
	"settle":       `func settle(ctx context.Context, tx *sql.Tx) error { return nil }`,
	"reindex":      `func reindex(ctx context.Context, tx *sql.Tx) error { return nil }`,
	"pay":          `func pay(w http.ResponseWriter, r *http.Request) {}`,
	"show":         `func show(w http.ResponseWriter, r *http.Request) {}`,
	"cancel":       `func cancel(w http.ResponseWriter, r *http.Request) {}`,
	"orders":       `type orders struct{}`,
	"claimJob":     `func claimJob(ctx context.Context, db *sql.DB, id int32) (bool, error) { return false, nil }`,
}
