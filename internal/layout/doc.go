// Package layout holds no code. Its test keeps the module's import rules in
// one table: the core and the net/http middleware stay light (the standard
// library and the module's own packages only), each third-party dependency is
// imported by the packages that exist to wrap it, the transports never depend
// on each other, and nothing imports a program.
package layout
