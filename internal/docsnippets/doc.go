// Package docsnippets holds the test that every Go code block of README.md and
// docs/*.md compiles against the module as it is: a snippet that uses an API
// that changed fails go test -short, naming its file and line.
//
// A block that is deliberately not Go (pseudo-code, output) is marked on the
// line before its fence, with a reason:
//
//	<!-- snippet: skip (why it is not Go) -->
//
// Fragments compile against a set of common declarations (ctx, db, conn,
// tx, key, the namespaces the docs use, stand-ins for the reader's own
// functions), which common_test.go lists.
package docsnippets
