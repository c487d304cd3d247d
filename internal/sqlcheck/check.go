package sqlcheck

import "strings"

// Unqualified returns the names in query that search_path would resolve,
// each as `function "now"`, `relation "pg_locks"` or `type "int8"`, in the
// order they first appear; nil when there is none. It reports:
//
//   - a function called without the schema pg_catalog or pgadvisory;
//   - a relation named without a schema: after FROM, JOIN, UPDATE, INTO,
//     TABLE, SEQUENCE and REFERENCES, after ON in CREATE INDEX, and in the
//     string literal that nextval, setval, currval, to_regclass or a cast
//     to regclass reads as a relation's name;
//   - a type after :: without the schema pg_catalog, unless SQL's grammar
//     names it (bigint, integer, boolean, ...).
//
// SQL's syntax that looks like a call is not a function: VALUES (...),
// IN (...), EXISTS (...), coalesce, nullif, greatest, least, extract, and
// an alias's column list, AS k(k).
func Unqualified(query string) []string {
	toks := lex(query)
	var found []string
	seen := make(map[string]bool)
	report := func(what string, parts []string) {
		s := what + ` "` + strings.Join(parts, ".") + `"`
		if !seen[s] {
			seen[s] = true
			found = append(found, s)
		}
	}
	index := false // the statement creates an index: ON names its table
	for i, t := range toks {
		if t.kind == punct && t.text == ";" {
			index = false
			continue
		}
		if t.kind == str {
			if namesRelation(toks, i) {
				if n := lex(t.text); len(n) != 1 || n[0].kind != name || len(n[0].parts) < 2 {
					report("relation", []string{t.text})
				}
			}
			continue
		}
		if t.kind != name {
			continue
		}
		w := t.word()
		if w == "index" {
			index = true
		}
		prev := before(toks, i)
		pw := prev.word()
		call := isPunct(at(toks, i+1), "(")
		switch {
		case isPunct(prev, "::"):
			if !keywordTypes[w] && !inSchema(t, "pg_catalog", "pgadvisory") {
				report("type", t.parts)
			}
		case call && syntax[w], call && pw == "as":
			// SQL's syntax, or an alias's column list.
		case call && (relationThenList[pw] || pw == "on" && index):
			if len(t.parts) < 2 {
				report("relation", t.parts)
			}
		case call:
			if !inSchema(t, "pg_catalog", "pgadvisory") {
				report("function", t.parts)
			}
		case (relationAfter[pw] || pw == "on" && index) && !notRelation[w]:
			if len(t.parts) < 2 {
				report("relation", t.parts)
			}
		}
	}
	return found
}

// at returns toks[i], or a token that matches nothing past the end.
func at(toks []token, i int) token {
	if i < 0 || i >= len(toks) {
		return token{kind: number}
	}
	return toks[i]
}

// before returns the token before toks[i], skipping IF [NOT] EXISTS, so
// that the name in CREATE TABLE IF NOT EXISTS t follows TABLE.
func before(toks []token, i int) token {
	j := i - 1
	if at(toks, j).word() == "exists" {
		switch {
		case at(toks, j-1).word() == "not" && at(toks, j-2).word() == "if":
			j -= 3
		case at(toks, j-1).word() == "if":
			j -= 2
		}
	}
	return at(toks, j)
}

// namesRelation reports whether the string literal toks[i] is read as a
// relation's name: the first argument of a function that takes one, or a
// literal cast to regclass.
func namesRelation(toks []token, i int) bool {
	if isPunct(at(toks, i-1), "(") {
		if f := at(toks, i-2); f.kind == name && regclassFuncs[f.parts[len(f.parts)-1]] {
			return true
		}
	}
	for j := i + 1; isPunct(at(toks, j), "::") && at(toks, j+1).kind == name; j += 2 {
		if p := at(toks, j+1).parts; p[len(p)-1] == "regclass" {
			return true
		}
	}
	return false
}

// isPunct reports whether t is the punctuation p.
func isPunct(t token, p string) bool { return t.kind == punct && t.text == p }

// inSchema reports whether the name t is qualified with one of schemas.
func inSchema(t token, schemas ...string) bool {
	if len(t.parts) < 2 {
		return false
	}
	for _, s := range schemas {
		if t.parts[0] == s {
			return true
		}
	}
	return false
}

// set makes a set of words.
func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var (
	// syntax holds the keywords that a parenthesis may follow without
	// making them a function call.
	syntax = set("all", "and", "any", "array", "as", "by", "case", "cast", "check", "coalesce", "else",
		"exists", "extract", "filter", "from", "greatest", "in", "is", "join", "key", "lateral", "least",
		"limit", "not", "nullif", "offset", "on", "or", "over", "references", "returning", "row",
		"select", "some", "then", "union", "unique", "using", "values", "when", "where", "with")
	// relationAfter holds the keywords that a relation's name follows.
	relationAfter = set("from", "join", "update", "into", "table", "sequence", "references")
	// relationThenList holds those of them after which a relation's name
	// is followed by a list of columns in parentheses.
	relationThenList = set("into", "table", "references")
	// notRelation holds the keywords that may stand where a relation's
	// name would.
	notRelation = set("if", "lateral", "only")
	// regclassFuncs holds the functions whose first argument names a
	// relation.
	regclassFuncs = set("nextval", "setval", "currval", "to_regclass", "regclass")
	// keywordTypes holds the type names that SQL's grammar resolves to
	// pg_catalog's types whatever the search_path.
	keywordTypes = set("bigint", "bit", "boolean", "char", "character", "dec", "decimal", "double",
		"float", "int", "integer", "interval", "numeric", "real", "smallint", "time", "timestamp", "varchar")
)
