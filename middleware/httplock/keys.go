package httplock

import (
	"fmt"
	"net/http"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// A KeyFunc returns the lock key of a request. It must not read the request
// body. An error means the request does not name a resource; [XactLock]
// answers it with 400 Bad Request without touching the database. The error
// [ErrNoLock] instead serves the request without a lock.
type KeyFunc func(r *http.Request) (advisory.Key, error)

// PathKey returns a KeyFunc for a route parameter that holds an int32 id,
// such as {id} in "/orders/{id}": the key is [advisory.PairKey](ns, id).
// The value is read with r.PathValue, which Go's ServeMux and chi fill
// in. A missing value, or one that is not an id by the rules of the
// package documentation's Keys section, is an error matching [ErrBadKey].
//
// PathKey panics if param is empty.
func PathKey(ns int32, param string) KeyFunc {
	return idKey(ns, pathSource("PathKey", param))
}

// PathInt64Key is [PathKey] for an int64 id: the key is
// [advisory.Int64Key](id).
//
// PathInt64Key panics if param is empty.
func PathInt64Key(param string) KeyFunc {
	return int64Key(pathSource("PathInt64Key", param))
}

// PathNameKey returns a KeyFunc for one or more route parameters that name
// a resource, such as {tenant} and {slug} in "/t/{tenant}/docs/{slug}": the
// key is [advisory.NameKey](ns, JoinName(values...)). With one parameter that
// is advisory.NameKey(ns, value), the key that
// pg_advisory_xact_lock(ns, hashtext(value)) takes. The values are read with
// r.PathValue and may hold any bytes; an empty or missing value is an error
// matching [ErrBadKey].
//
// PathNameKey panics if no parameter is given or one is empty.
func PathNameKey(ns int32, params ...string) KeyFunc {
	if len(params) == 0 {
		panic("httplock: PathNameKey: no path parameters given")
	}
	srcs := make([]source, len(params))
	for i, p := range params {
		srcs[i] = pathSource("PathNameKey", p)
	}
	return nameKey(ns, srcs)
}

// ValueKey is [PathKey] for routers that keep route variables elsewhere
// than r.PathValue: get returns the value, an int32 id, and the key is
// [advisory.PairKey](ns, id), checked as PathKey checks it. For
// gorilla/mux:
//
//	key := httplock.ValueKey(ordersNS, func(r *http.Request) string { return mux.Vars(r)["id"] })
//
// ValueKey panics if get is nil.
func ValueKey(ns int32, get func(*http.Request) string) KeyFunc {
	return idKey(ns, valueSource("ValueKey", "value", get))
}

// ValueInt64Key is [PathInt64Key] for a value that get returns: the key is
// advisory.Int64Key(id).
//
// ValueInt64Key panics if get is nil.
func ValueInt64Key(get func(*http.Request) string) KeyFunc {
	return int64Key(valueSource("ValueInt64Key", "value", get))
}

// ValueNameKey is [PathNameKey] for values that gets return, in order: the
// key is advisory.NameKey(ns, JoinName(values...)).
//
// ValueNameKey panics if no func is given or one is nil.
func ValueNameKey(ns int32, gets ...func(*http.Request) string) KeyFunc {
	if len(gets) == 0 {
		panic("httplock: ValueNameKey: no value funcs given")
	}
	srcs := make([]source, len(gets))
	for i, get := range gets {
		what := "value"
		if len(gets) > 1 {
			what = fmt.Sprintf("value %d", i+1)
		}
		srcs[i] = valueSource("ValueNameKey", what, get)
	}
	return nameKey(ns, srcs)
}
