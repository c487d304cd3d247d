// Package sqlcheck finds the names in SQL text that the session's
// search_path could redirect: functions, relations and cast types named
// without a schema. A schema placed before pg_catalog in search_path can
// define pg_try_advisory_lock or pg_locks of its own, and an unqualified
// CREATE lands in whichever schema comes first, so every name the
// library's statements use is qualified, with pg_catalog for
// PostgreSQL's own and pgadvisory for the library's.
//
// [Unqualified] reads a statement as PostgreSQL's lexer would (string
// literals, quoted identifiers, dollar quotes and comments are skipped)
// but does not parse it: it knows the few positions where a name means a
// function, a relation or a type, which is enough for the statements of
// this module. Its tests call it on every statement a package can build.
package sqlcheck
