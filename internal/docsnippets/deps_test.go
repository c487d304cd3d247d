package docsnippets

import (
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// The snippets compile against these packages, and the test binary imports
// them for that alone: go test caches a passing result until the test
// binary or a file the test reads changes, and the build of the snippets
// runs in a process whose inputs the cache does not see. Imported here, a
// change to any of them is a change to the test binary, and runs the test
// again.
import (
	_ "github.com/DATA-DOG/go-sqlmock"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/go-chi/chi/v5/middleware"
	_ "github.com/gorilla/mux"
	_ "github.com/jmoiron/sqlx"
	_ "github.com/pgadvisory/pgadvisory/advisory"
	_ "github.com/pgadvisory/pgadvisory/advisory/idempotency"
	_ "github.com/pgadvisory/pgadvisory/advisory/inspect"
	_ "github.com/pgadvisory/pgadvisory/advisory/keyspace"
	_ "github.com/pgadvisory/pgadvisory/advisory/leader"
	_ "github.com/pgadvisory/pgadvisory/advisory/semaphore"
	_ "github.com/pgadvisory/pgadvisory/middleware/grpclock"
	_ "github.com/pgadvisory/pgadvisory/middleware/httplock"
	_ "github.com/pgadvisory/pgadvisory/mock"
	_ "github.com/pgadvisory/pgadvisory/pgtest"
	_ "github.com/pgadvisory/pgadvisory/sqlxlock"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/status"
)

// TestDepsListPackages checks that this file imports every package of
// packages outside the standard library, so that the list above and the
// names snippets may use stay one list.
func TestDepsListPackages(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "deps_test.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	imported := make(map[string]bool)
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		imported[p] = true
	}
	for name, p := range packages {
		if name != "pb" && strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && !imported[p] {
			t.Errorf("deps_test.go does not import %s (%s)", p, name)
		}
	}
}
