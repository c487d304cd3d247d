package pgtest

import (
	"context"
	"fmt"
	"os"
)

// Launch gives a runnable example program a PostgreSQL without a
// testing.TB. It returns DATABASE_URL when that is set, with a stop that
// does nothing. Otherwise it follows the order the package documentation
// gives, starting only the first configured image: the first server of
// PGADVISORY_TEST_DSN, a container of the first image of
// PGADVISORY_TEST_IMAGES, or a cluster from local binaries. The caller must
// call stop, which removes what Launch started. Launch prints nothing.
func Launch(ctx context.Context) (dsn string, stop func(), err error) {
	if dsn := os.Getenv(envExample); dsn != "" {
		return dsn, func() {}, nil
	}
	r := start(ctx, nil, true)
	if r.err != nil {
		return "", nil, fmt.Errorf("pgtest: %w", r.err)
	}
	return r.servers[0].DSN, r.stop, nil
}
