package sqltext

// Form is how a statement about one key carries the key.
type Form uint8

const (
	// Inline renders the key into the text, as every statement in this
	// package does: one round trip on every driver, through the simple
	// query protocol, which parses and plans the statement on every call.
	Inline Form = iota
	// Params sends the key as parameters, $1 (or $1 and $2 for a pair),
	// so the text is the same for every key. pgx prepares it once per
	// connection, caches it, and then runs it in one round trip without
	// parsing it again. lib/pq would take two round trips for every call.
	Params
)

// Stmt is a statement ready to send: its text and the arguments it takes.
type Stmt struct {
	Query string
	Args  []any // nil when Query takes none
}

// Plain returns a statement without parameters.
func Plain(query string) Stmt { return Stmt{Query: query} }

// keyArgs returns key as the arguments of $1, or of $1 and $2 for a pair.
func keyArgs(key Key) []any {
	if key.Pair {
		return []any{key.A, key.B}
	}
	return []any{key.Bigint}
}

// LockStmt is [Lock] for one key, in form f.
func LockStmt(f Form, xact, shared bool, key Key) Stmt {
	return single(f, "SELECT ", fn("pg_advisory", xact, shared), key)
}

// TryLockStmt is [TryLock] in form f.
func TryLockStmt(f Form, xact, shared bool, key Key) Stmt {
	return single(f, "SELECT 1 WHERE ", fn("pg_try_advisory", xact, shared), key)
}

// UnlockStmt is [Unlock] for one key, in form f.
func UnlockStmt(f Form, shared bool, key Key) Stmt {
	return single(f, "SELECT 1 WHERE ", unlockFn(shared), key)
}

// single returns prefix + "name(key)" in form f. The texts of the Params
// form are made once, so that a call builds no string.
func single(f Form, prefix, name string, key Key) Stmt {
	if f == Params {
		return Stmt{Query: paramTexts[name][b2i(key.Pair)], Args: keyArgs(key)}
	}
	return Stmt{Query: statement(prefix, name, key)}
}

// paramTexts holds, for every function a single-key statement calls, its
// statement in the Params form, for a bigint key and for a pair.
var paramTexts = func() map[string][2]string {
	m := make(map[string][2]string)
	add := func(prefix, name string) {
		m[name] = [2]string{prefix + name + "($1)", prefix + name + "($1,$2)"}
	}
	for xact := range 2 {
		for shared := range 2 {
			add("SELECT ", lockFns[0][xact][shared])
			add("SELECT 1 WHERE ", lockFns[1][xact][shared])
		}
	}
	for _, shared := range []bool{false, true} {
		add("SELECT 1 WHERE ", unlockFn(shared))
	}
	return m
}()
