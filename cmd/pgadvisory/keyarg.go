package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// A keyArg is a KEY argument read:
//
//	42           the bigint key 42, pg_advisory_lock(42)
//	7:12         the pair key (7, 12), pg_advisory_lock(7, 12)
//	7:nightly    the pair (7, hashtext('nightly')), as advisory.NameKey(7, "nightly")
//	billing:nightly
//	             the same, with namespace 7 named "billing" in the
//	             dictionary table
//
// A part after the colon that is a decimal integer is a number, never a
// name. A bare name without a colon is not a key for exec; the key command
// shows the bigint keys it hashes to.
type keyArg struct {
	text   string
	key    advisory.Key
	isName bool   // NAMESPACE:NAME, the name hashed
	nsName string // the namespace as written, when it is a name
	ns     int32  // the namespace's ID, once known
	name   string // the name hashed, when isName
	bare   bool   // a bare name, no colon
}

// errBareName means a KEY argument was a bare name.
var errBareName = errors.New("a bare name is not a key")

// parseKeyArg reads s. A namespace written as a name is left for
// resolve to look up.
func parseKeyArg(s string) (*keyArg, error) {
	k := &keyArg{text: s}
	if s == "" {
		return nil, errors.New("empty key")
	}
	if strings.ContainsRune(s, 0) {
		return nil, fmt.Errorf("key %q: PostgreSQL text cannot hold a NUL byte", s)
	}
	left, right, pair := strings.Cut(s, ":")
	if !pair {
		if isInteger(s) {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("key %s: out of the range of a bigint", s)
			}
			k.key = advisory.Int64Key(v)
			return k, nil
		}
		k.bare, k.name = true, s
		return k, nil
	}
	if left == "" {
		return nil, fmt.Errorf("key %q: empty namespace before the colon", s)
	}
	if right == "" {
		return nil, fmt.Errorf("key %q: empty name after the colon", s)
	}
	if isInteger(left) {
		v, err := strconv.ParseInt(left, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("key %s: namespace %s is out of the range of an int4", s, left)
		}
		k.ns = int32(v)
	} else {
		k.nsName = left
	}
	if isInteger(right) {
		v, err := strconv.ParseInt(right, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("key %s: %s is out of the range of an int4", s, right)
		}
		if k.nsName != "" {
			k.key = advisory.PairKey(0, int32(v)) // first half set by resolve
		} else {
			k.key = advisory.PairKey(k.ns, int32(v))
		}
		return k, nil
	}
	k.isName, k.name = true, right
	k.key = advisory.NameKey(k.ns, right)
	return k, nil
}

// needsDictionary reports whether the namespace is a name to look up.
func (k *keyArg) needsDictionary() bool { return k.nsName != "" }

// resolve looks the namespace's name up in the dictionary table, when it is
// written as a name, and completes the key.
func (k *keyArg) resolve(ctx context.Context, db *database) error {
	if !k.needsDictionary() {
		return nil
	}
	dict, err := loadDictionary(ctx, db)
	if err != nil {
		return err
	}
	if !dict.exists {
		return fmt.Errorf("key %s: namespace %q is a name, and the dictionary table %s does not exist; write the namespace's number", k.text, k.nsName, dict.table)
	}
	ns, ok := dict.byName(k.nsName)
	if !ok {
		return fmt.Errorf("key %s: no namespace is named %q in the dictionary table %s", k.text, k.nsName, dict.table)
	}
	k.ns = ns.ID
	if k.isName {
		k.key = advisory.NameKey(ns.ID, k.name)
	} else {
		_, n, _ := k.key.Pair()
		k.key = advisory.PairKey(ns.ID, n)
	}
	return nil
}

// isInteger reports whether s is a decimal integer, with an optional sign.
func isInteger(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
