package sqltext

// Form is how a statement about one key carries the key.
type Form uint8

const (
	// Inline renders the key into the text, as most statements in this
	// package do: one round trip on every driver, through the simple query
	// protocol, which parses and plans the statement on every call.
	Inline Form = iota
	// Params sends the key as parameters, $1 (or $1 and $2 for a pair),
	// so the text is the same for every key. pgx prepares it once per
	// connection, caches it, and then runs it in one round trip without
	// parsing it again. lib/pq would take two round trips for every call.
	Params
)

// Stmt is a statement ready to send.
type Stmt struct {
	Query string // the statement's text
	Args  []any  // the arguments of its parameters; nil when it has none
}

// Plain returns a statement without parameters.
func Plain(query string) Stmt { return Stmt{Query: query} }

// TryLockStmt is [TryLock], in form f.
func TryLockStmt(f Form, g Guard, xact, shared bool, key Key) Stmt {
	switch {
	case f == Params && g == Guarded:
		return params(tryParamTexts[b2i(xact)][b2i(shared)], key)
	case f == Params:
		return params(tryParamText(g, xact, shared), key)
	}
	return Plain(TryLock(g, xact, shared, key))
}

// UnlockStmt is [Unlock] for one key, in form f.
func UnlockStmt(f Form, shared bool, key Key) Stmt {
	if f == Params {
		return params(unlockParamTexts[b2i(shared)], key)
	}
	return Plain(Unlock(shared, key))
}

// callIn renders "name(key)" in form f, and the arguments it then takes.
func callIn(f Form, name string, key Key) (string, []any) {
	if f != Params {
		return call(name, key), nil
	}
	s := params([2]string{name + "($1)", name + "($1,$2)"}, key)
	return s.Query, s.Args
}

// params returns the statement of texts, for a bigint key and for a pair,
// that fits key, with key as its arguments.
func params(texts [2]string, key Key) Stmt {
	if key.Pair {
		return Stmt{Query: texts[1], Args: []any{key.A, key.B}}
	}
	return Stmt{Query: texts[0], Args: []any{key.Bigint}}
}

// tryParamTexts and unlockParamTexts hold the single-key statements of
// the Params form: the Guarded try's as lockFns is indexed (by whether
// the lock is a transaction's, then shared), and each by whether the key
// is a pair. They are made once, so that a call builds no string; a
// lease's own try, whose text carries its mark, is made per call
// ([tryParamText]).
var (
	tryParamTexts    [2][2][2]string
	unlockParamTexts [2][2]string
)

// paramTexts returns prefix, the call name, and suffix, for a bigint key
// ($1) and for a pair ($1,$2).
func paramTexts(prefix, name, suffix string) [2]string {
	return [2]string{prefix + name + "($1)" + suffix, prefix + name + "($1,$2)" + suffix}
}

// tryParamText returns the Params form of a try guarded by g.
func tryParamText(g Guard, xact, shared bool) [2]string {
	return paramTexts(tryPrefix(g), lockFns[1][b2i(xact)][b2i(shared)], trySuffix)
}

func init() {
	for xact := range 2 {
		for shared := range 2 {
			tryParamTexts[xact][shared] = tryParamText(Guarded, xact == 1, shared == 1)
		}
	}
	for shared := range 2 {
		unlockParamTexts[shared] = paramTexts("SELECT 1 WHERE ", unlockFn(shared == 1), "")
	}
}
