package layout_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/pgadvisory/pgadvisory"

// owners maps each wrapped dependency to the one package that may import
// it outside test files; an entry ending in "/" allows every package below
// it. The library imports no driver: only the test harness and the example
// programs, which are programs like a user's, do.
var owners = map[string][]string{
	"github.com/jmoiron/sqlx":        {module + "/sqlxlock"},
	"github.com/DATA-DOG/go-sqlmock": {module + "/mock"},
	"google.golang.org/grpc":         {module + "/middleware/grpclock"},
	"github.com/lib/pq":              {module + "/internal/pgtest", module + "/examples/"},
	"github.com/jackc/pgx/v5":        {module + "/internal/pgtest", module + "/examples/"},
	"github.com/ory/dockertest/v3":   {module + "/internal/pgtest"},
}

// TestImporters checks every package of the module against owners.
func TestImporters(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		checked++
		pkg := fields[0]
		for _, imp := range fields[1:] {
			for dep, allowed := range owners {
				if (imp == dep || strings.HasPrefix(imp, dep+"/")) && !contains(allowed, pkg) {
					t.Errorf("%s imports %s; only %v may", pkg, imp, allowed)
				}
			}
		}
	}
	if checked < 8 {
		t.Fatalf("go list found only %d packages; the check saw too little", checked)
	}
}

// contains reports whether pkg is in list, or below an entry ending in "/".
func contains(list []string, pkg string) bool {
	for _, v := range list {
		if v == pkg || strings.HasSuffix(v, "/") && strings.HasPrefix(pkg, v) {
			return true
		}
	}
	return false
}
