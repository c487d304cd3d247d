package httplock

import (
	"fmt"
	"net/http"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// A source is where a key function finds one value of the request.
type source struct {
	what string // names the value in errors, such as `path parameter "id"`
	get  func(*http.Request) string
}

// pathSource reads the path parameter param; fn names the constructor in
// its panic.
func pathSource(fn, param string) source {
	if param == "" {
		panic("httplock: " + fn + ": empty path parameter name")
	}
	return source{fmt.Sprintf("path parameter %q", param), func(r *http.Request) string { return r.PathValue(param) }}
}

// valueSource reads the value get returns; fn names the constructor in its
// panic.
func valueSource(fn, what string, get func(*http.Request) string) source {
	if get == nil {
		panic("httplock: " + fn + ": nil value func")
	}
	return source{what, get}
}

// idKey returns advisory.PairKey(ns, id) for an int32 id.
func idKey(ns int32, s source) KeyFunc {
	return func(r *http.Request) (advisory.Key, error) {
		k, err := reqlock.Key(ns, s.what, s.get(r))
		if err != nil {
			return advisory.Key{}, keyError(err)
		}
		return k, nil
	}
}

// int64Key returns advisory.Int64Key(id) for an int64 id.
func int64Key(s source) KeyFunc {
	return func(r *http.Request) (advisory.Key, error) {
		k, err := reqlock.Int64Key(s.what, s.get(r))
		if err != nil {
			return advisory.Key{}, keyError(err)
		}
		return k, nil
	}
}

// nameKey returns advisory.NameKey(ns, JoinName(values...)) for non-empty
// values.
func nameKey(ns int32, srcs []source) KeyFunc {
	return func(r *http.Request) (advisory.Key, error) {
		values := make([]string, len(srcs))
		for i, s := range srcs {
			v := s.get(r)
			if err := reqlock.CheckName(s.what, v); err != nil {
				return advisory.Key{}, keyError(err)
			}
			values[i] = v
		}
		return advisory.NameKey(ns, JoinName(values...)), nil
	}
}
