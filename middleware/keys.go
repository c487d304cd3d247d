package middleware

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// A KeyFunc returns the lock key of a request. It must not read the request
// body. An error means the request does not name a resource; [XactLock]
// answers it with 400 Bad Request without touching the database.
type KeyFunc func(r *http.Request) (advisory.Key, error)

// PathKey returns a KeyFunc for a route parameter that holds a decimal
// int32 id, such as {id} in "/orders/{id}": the key is
// advisory.PairKey(ns, id). The value is read with r.PathValue, which Go's
// ServeMux and chi fill in. A missing value, one that is not a decimal
// integer, or one outside the int32 range is an error matching [ErrBadKey].
//
// PathKey panics if param is empty.
func PathKey(ns int32, param string) KeyFunc {
	mustParam("PathKey", param)
	return func(r *http.Request) (advisory.Key, error) {
		id, err := pathInt(r, param, 32)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.PairKey(ns, int32(id)), nil
	}
}

// PathInt64Key returns a KeyFunc for a route parameter that holds a decimal
// int64 id: the key is advisory.Int64Key(id). The value is read with
// r.PathValue. A missing value, or one that is not a decimal int64, is an
// error matching [ErrBadKey].
//
// PathInt64Key panics if param is empty.
func PathInt64Key(param string) KeyFunc {
	mustParam("PathInt64Key", param)
	return func(r *http.Request) (advisory.Key, error) {
		id, err := pathInt(r, param, 64)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.Int64Key(id), nil
	}
}

// PathNameKey returns a KeyFunc for one or more route parameters that name
// a resource, such as {tenant} and {slug} in "/t/{tenant}/docs/{slug}": the
// key is advisory.NameKey(ns, JoinName(values...)). With one parameter that
// is advisory.NameKey(ns, value), the key that
// pg_advisory_xact_lock(ns, hashtext(value)) takes. The values are read with
// r.PathValue and may hold any bytes; an empty or missing value is an error
// matching [ErrBadKey].
//
// PathNameKey panics if no parameter is given or one is empty.
func PathNameKey(ns int32, params ...string) KeyFunc {
	if len(params) == 0 {
		panic("middleware: PathNameKey: no path parameters given")
	}
	for _, p := range params {
		mustParam("PathNameKey", p)
	}
	params = append([]string(nil), params...)
	return func(r *http.Request) (advisory.Key, error) {
		values := make([]string, len(params))
		for i, p := range params {
			v := r.PathValue(p)
			if v == "" {
				return advisory.Key{}, badParam(fmt.Sprintf("path parameter %q", p), "", "missing")
			}
			values[i] = v
		}
		return advisory.NameKey(ns, JoinName(values...)), nil
	}
}

// JoinName joins values into the one name that [PathNameKey] hashes, so that
// code outside HTTP can take the same lock with advisory.NameKey(ns,
// JoinName(values...)). One value is returned as it is. Several are each
// written as their length in bytes, in decimal, a colon, and the value:
// JoinName("a/b", "c") is "3:a/b1:c" and JoinName("a", "b/c") is "1:a3:b/c",
// so distinct lists never join alike. In SQL the same name is
// octet_length(a) || ':' || a || octet_length(b) || ':' || b.
func JoinName(values ...string) string {
	if len(values) == 1 {
		return values[0]
	}
	n := 0
	for _, v := range values {
		n += len(v) + 21
	}
	var b strings.Builder
	b.Grow(n)
	for _, v := range values {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// IDKey returns advisory.PairKey(ns, id) for s, a decimal int32 id,
// checked as [PathKey] checks a path parameter: an empty s, or one that is
// not a decimal integer in the int32 range, is an error matching
// [ErrBadKey]. It serves routers that keep route variables elsewhere than
// r.PathValue, such as gorilla/mux:
//
//	key := func(r *http.Request) (advisory.Key, error) { return middleware.IDKey(ns, mux.Vars(r)["id"]) }
func IDKey(ns int32, s string) (advisory.Key, error) {
	id, err := parseInt("id", s, 32)
	if err != nil {
		return advisory.Key{}, err
	}
	return advisory.PairKey(ns, int32(id)), nil
}

// pathInt reads the path parameter param as a decimal integer of bits bits.
func pathInt(r *http.Request, param string, bits int) (int64, error) {
	return parseInt(fmt.Sprintf("path parameter %q", param), r.PathValue(param), bits)
}

// parseInt reads v, the value of what, as a decimal integer of bits bits.
func parseInt(what, v string, bits int) (int64, error) {
	if v == "" {
		return 0, badParam(what, "", "missing")
	}
	id, err := strconv.ParseInt(v, 10, bits)
	if err == nil {
		return id, nil
	}
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if bits == 64 {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		return 0, badParam(what, v, fmt.Sprintf("out of range [%d, %d]", lo, hi))
	}
	return 0, badParam(what, v, "not a decimal integer")
}

// maxQuoted is how many bytes of a bad value an error message shows.
const maxQuoted = 32

// badParam reports a value, described by what, that names no key. The
// value is quoted and cut short, so that a huge parameter does not make a
// huge error.
func badParam(what, value, why string) error {
	if value == "" {
		return fmt.Errorf("%w: %s: %s", ErrBadKey, what, why)
	}
	q := value
	if len(q) > maxQuoted {
		q = q[:maxQuoted] + "..."
	}
	return fmt.Errorf("%w: %s = %q: %s", ErrBadKey, what, q, why)
}

func mustParam(fn, param string) {
	if param == "" {
		panic("middleware: " + fn + ": empty path parameter name")
	}
}
