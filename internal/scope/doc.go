// Package scope is the engine behind package advisory's lock functions and
// scoped helpers, shared with the packages that wrap them: the options and
// their checks, the classification of errors, the statements' execution,
// and the session and transaction scopes. advisory, sqlxlock and mock call
// it directly, so each of them takes locks, reports failures and expects
// statements exactly as advisory does.
//
// It imports the standard library and internal/sqltext only.
package scope
