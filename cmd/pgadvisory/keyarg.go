package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// A keyArg is a KEY argument read. A KEY is what advisory.ParseKey reads,
// and the command adds two forms to it:
//
//	42               the bigint key 42, pg_advisory_lock(42)
//	7:12             the pair key (7, 12), pg_advisory_lock(7, 12)
//	7:nightly        the pair (7, hashtext('nightly')), as advisory.NameKey(7, "nightly")
//	7:"2024"         the pair (7, hashtext('2024')): a quoted name
//	billing:nightly  the same as 7:nightly, with namespace 7 named "billing"
//	                 in the dictionary table (added by the command)
//	nightly          a bare name: not a key for exec; the key command shows
//	                 the bigint keys it hashes to (added by the command)
//	"2024"           a bare name, quoted as after a colon
//
// The command needs the database to read the dictionary table, which
// ParseKey cannot; a namespace written as a name is the only thing it reads
// beyond ParseKey, and the part after the colon follows ParseKey's rules.
type keyArg struct {
	text   string
	key    advisory.Key
	isName bool   // NAMESPACE:NAME, the name hashed
	nsName string // the namespace as written, when it is a name
	ns     int32  // the namespace's ID, once known
	rest   string // what follows the colon, as written
	name   string // the name hashed, when isName or bare
	bare   bool   // a bare name, no colon
}

// errBareName means a KEY argument was a bare name.
var errBareName = errors.New("a bare name is not a key")

// errNoNamespace means the dictionary table, or the namespace's row in
// it, is missing: the database answered, and the key cannot be made.
var errNoNamespace = errors.New("no such namespace")

// A noNamespaceError says why a namespace's name has no number; it matches
// errNoNamespace.
type noNamespaceError struct{ msg string }

func (e *noNamespaceError) Error() string { return e.msg }

func (e *noNamespaceError) Is(target error) bool { return target == errNoNamespace }

// parseKeyArg reads s. A namespace written as a name is left for
// resolve to look up.
func parseKeyArg(s string) (*keyArg, error) {
	k := &keyArg{text: s}
	left, right, pair := strings.Cut(s, ":")
	switch {
	case s == "":
		return nil, errors.New("empty key")
	case s[0] == '"' || !pair && !numeric(s):
		name := s
		if s[0] == '"' {
			var err error
			if name, err = strconv.Unquote(s); err != nil {
				return nil, fmt.Errorf("key %q: a name that begins with a double quote must be one Go double-quoted string", s)
			}
		}
		if strings.IndexByte(name, 0) >= 0 {
			return nil, fmt.Errorf("key %q: PostgreSQL text cannot hold a NUL byte", s)
		}
		k.bare, k.name = true, name
		return k, nil
	case pair && left != "" && !numeric(left):
		// A namespace's name: check the rest now, with a stand-in
		// number, and complete the key once resolve has the number.
		k.nsName, k.rest = left, right
		probe := "0:" + right
		key, err := advisory.ParseKey(probe)
		if err != nil {
			return nil, keyError(s, probe, err)
		}
		k.key = key
		return k, k.readName()
	}
	key, err := advisory.ParseKey(s)
	if err != nil {
		return nil, keyError(s, s, err)
	}
	k.key = key
	if pair {
		k.ns, _, _ = key.Pair()
		k.rest = right
	}
	return k, k.readName()
}

// readName records the name after the colon, when there is one, from the
// rest of the key that advisory.ParseKey read.
func (k *keyArg) readName() error {
	if k.rest == "" || numeric(k.rest) {
		return nil
	}
	k.isName, k.name = true, k.rest
	if k.rest[0] == '"' {
		name, err := strconv.Unquote(k.rest)
		if err != nil {
			return fmt.Errorf("key %q: %v", k.text, err) // ParseKey read it: unreachable
		}
		k.name = name
	}
	if _, h, _ := k.key.Pair(); h != advisory.HashText(k.name) {
		return fmt.Errorf("key %q: the name %q does not hash to the key read", k.text, k.name) // unreachable
	}
	return nil
}

// keyError rewords advisory.ParseKey's error for read, which stands for
// the argument s, as the command's: key "s": why.
func keyError(s, read string, err error) error {
	msg := err.Error()
	if why, ok := strings.CutPrefix(msg, fmt.Sprintf("%v %q: ", advisory.ErrBadKey, read)); ok {
		return fmt.Errorf("key %q: %s", s, why)
	}
	return fmt.Errorf("key %q: %s", s, strings.TrimPrefix(msg, advisory.ErrBadKey.Error()+" "))
}

// numeric reports whether s begins as a number does in a key: with a
// decimal digit or a sign. A namespace that does not is a name.
func numeric(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '+')
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
		return &noNamespaceError{fmt.Sprintf("key %s: namespace %q is a name, and the dictionary table %s does not exist; write the namespace's number, as in %s", k.text, k.nsName, dict.table, k.numericExample())}
	}
	ns, ok := dict.byName(k.nsName)
	if !ok {
		return &noNamespaceError{fmt.Sprintf("key %s: no namespace is named %q in the dictionary table %s", k.text, k.nsName, dict.table)}
	}
	k.ns = ns.ID
	key, err := advisory.ParseKey(fmt.Sprintf("%d:%s", ns.ID, k.rest))
	if err != nil {
		return keyError(k.text, fmt.Sprintf("%d:%s", ns.ID, k.rest), err) // parseKeyArg read the rest: unreachable
	}
	k.key = key
	return nil
}

// numericExample returns k with its namespace written as the number 7,
// for messages that say how to write a key without the dictionary.
func (k *keyArg) numericExample() string {
	return "7:" + k.rest
}

// explainUnreachable returns err, a failure to connect, with what a
// namespace written as a name needs: the dictionary table on the server.
func (k *keyArg) explainUnreachable(err error) error {
	return fmt.Errorf("key %s: namespace %q is a name, which needs the dictionary table %s on the server, and the database cannot be reached: %w; give the namespace's number instead (%s if %s is namespace 7), or see 'pgadvisory help connect'",
		k.text, k.nsName, keyspace.DefaultTable, err, k.numericExample(), k.nsName)
}
