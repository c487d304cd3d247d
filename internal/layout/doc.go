// Package layout holds no code. Its test keeps the module's import rules:
// each third-party dependency is imported by the one package that exists
// to wrap it.
package layout
