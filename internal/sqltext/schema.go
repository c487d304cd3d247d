package sqltext

// Schema is the schema that holds the library's own objects: the fencing
// sequence ([FencingSequence]), and the default tables of packages
// idempotency and keyspace. Its name is fixed, so that every session of a
// database finds the same objects whatever its search_path.
const Schema = "pgadvisory"

// CreateSchema creates [Schema] if it does not exist. Like every CREATE
// SCHEMA, it needs CREATE on the database even when the schema exists.
// Two sessions that create it at once may fail, the later one, with
// SQLSTATE 23505 (the catalog's unique index) or 42P06: the schema then
// exists.
const CreateSchema = "CREATE SCHEMA IF NOT EXISTS " + Schema

// SchemaExists returns one row: whether [Schema] exists. It needs no
// privilege.
const SchemaExists = "SELECT pg_catalog.to_regnamespace('" + Schema + "') IS NOT NULL"

// TablesNamed returns the schemas, in order, that hold a table named $1,
// whatever the search_path: it finds the tables that earlier releases
// created in the first schema of the caller's search_path. It reads the
// catalogs, so it needs no privilege.
const TablesNamed = "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_class c " +
	"JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace " +
	"WHERE c.relname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1"
