package pgtest

import (
	"os"
	"strings"
)

// The environment variables the harness reads.
const (
	envDSN     = "PGADVISORY_TEST_DSN"
	envImages  = "PGADVISORY_TEST_IMAGES"
	envPGBin   = "PGADVISORY_TEST_PGBIN"
	envExample = "DATABASE_URL"
	envCI      = "CI"
)

// defaultImage is the image used when PGADVISORY_TEST_IMAGES is not set.
const defaultImage = "postgres:17"

// settings are the postgres arguments every server starts with: a disposable
// server needs no durability.
var settings = []string{
	"-c", "fsync=off",
	"-c", "synchronous_commit=off",
	"-c", "full_page_writes=off",
	"-c", "max_connections=300",
}

// howToGetOne tells what to set when no database is available.
const howToGetOne = "no PostgreSQL for the tests: set " + envDSN +
	" to postgres:// URLs of existing servers, or make a Docker engine reachable (images from " +
	envImages + ", default " + defaultImage + "; ci/build-images.sh builds local ones)" +
	", or put PostgreSQL's initdb and postgres binaries on PATH (or in " + envPGBin + ")"

// underCI reports whether CI is set, as CI systems do with CI=true.
func underCI() bool {
	switch strings.ToLower(os.Getenv(envCI)) {
	case "", "0", "false", "no":
		return false
	}
	return true
}

// list splits a comma-separated variable, dropping empty items.
func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// images returns the configured Docker images.
func images() []string {
	if imgs := list(os.Getenv(envImages)); len(imgs) > 0 {
		return imgs
	}
	return []string{defaultImage}
}
