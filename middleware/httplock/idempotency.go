package httplock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/idempotency"
)

// IdempotencyKeyHeader is the request header that names an operation for
// [Idempotent].
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is the response header, with the value "true", that marks
// a response [Idempotent] replayed from its record rather than produced by
// the handler.
const ReplayedHeader = "Idempotent-Replayed"

// DefaultMaxResponseBytes is the largest response body [Idempotent]
// records unless [MaxResponseBytes] says otherwise: 1 MiB.
const DefaultMaxResponseBytes = 1 << 20

// MaxIdempotencyKeyLen is the longest Idempotency-Key, in bytes, that
// [Idempotent] accepts.
const MaxIdempotencyKeyLen = 255

// ErrMismatch means a request reused an Idempotency-Key that an earlier
// request with another method or path recorded. It is answered 422
// Unprocessable Entity, and the handler is not called.
var ErrMismatch = errors.New("httplock: Idempotency-Key reused for another request")

// ErrResponseTooLarge means the handler's response body was larger than
// [MaxResponseBytes], so it could not be recorded; its work was rolled
// back, and the client gets 500 Internal Server Error.
var ErrResponseTooLarge = errors.New("httplock: response too large to record")

// idemOptions are the settings of [Idempotent].
type idemOptions struct {
	table    []idempotency.RunOption
	maxBody  int
	methods  []string
	require  bool
	scope    func(*http.Request) (string, error)
	checkErr error // a bad IdempotencyTable, reported when Idempotent is built
}

func newIdemOptions() idemOptions {
	return idemOptions{maxBody: DefaultMaxResponseBytes, methods: []string{"POST", "PUT", "PATCH", "DELETE"}}
}

// IdempotencyTable makes [Idempotent] record its responses in the table
// name, "table" or "schema.table", instead of idempotency.DefaultTable.
// Idempotent panics when it is built if the name is not one that
// idempotency.Table accepts.
func IdempotencyTable(name string) IdempotentOption {
	err := idempotency.CheckTable(name)
	return idemOption(func(o *options) {
		o.idem.table, o.idem.checkErr = []idempotency.RunOption{idempotency.Table(name)}, err
	})
}

// MaxResponseBytes sets the largest response body that [Idempotent]
// records, DefaultMaxResponseBytes (1 MiB) by default. A handler whose
// body grows larger has its work rolled back, and the client gets 500
// Internal Server Error: a response that cannot be replayed must not
// commit. Idempotent buffers each response up to this size in memory.
//
// MaxResponseBytes panics if n is not positive.
func MaxResponseBytes(n int) IdempotentOption {
	if n <= 0 {
		panic(fmt.Sprintf("httplock: MaxResponseBytes(%d): not positive", n))
	}
	return idemOption(func(o *options) { o.idem.maxBody = n })
}

// IdempotentMethods sets the request methods that [Idempotent] covers,
// POST, PUT, PATCH and DELETE by default. Requests with other methods are
// served at once, without a transaction, as if they had no
// Idempotency-Key.
//
// IdempotentMethods panics if given no method.
func IdempotentMethods(methods ...string) IdempotentOption {
	if len(methods) == 0 {
		panic("httplock: IdempotentMethods: no method")
	}
	methods = slices.Clone(methods)
	return idemOption(func(o *options) { o.idem.methods = methods })
}

// RequireIdempotencyKey makes [Idempotent] answer a request of a covered
// method that has no Idempotency-Key with 400 Bad Request, instead of
// serving it without a transaction.
func RequireIdempotencyKey() IdempotentOption {
	return idemOption(func(o *options) { o.idem.require = true })
}

// IdempotencyScope gives each Idempotency-Key a scope, such as the
// authenticated account, so that two clients who pick the same key do not
// share a record: the operation key is made of the scope and the header's
// value. An error from scope is answered as a bad key, 400 Bad Request.
// By default every key shares one scope.
//
// IdempotencyScope panics if scope is nil.
func IdempotencyScope(scope func(r *http.Request) (string, error)) IdempotentOption {
	if scope == nil {
		panic("httplock: IdempotencyScope: nil func")
	}
	return idemOption(func(o *options) { o.idem.scope = scope })
}

// Idempotent returns middleware that runs each request carrying an
// Idempotency-Key header at most once, built on idempotency.Run. Per
// request of a covered method (see [IdempotentMethods]) it:
//
//  1. reads the key: a missing header serves the request at once, without
//     a transaction (with [RequireIdempotencyKey], answers 400 Bad
//     Request); a key that is repeated, longer than
//     [MaxIdempotencyKeyLen] bytes or not printable ASCII is answered 400
//     Bad Request, matching [ErrBadKey];
//  2. calls idempotency.Run with the key, which begins a transaction and
//     takes a transaction lock on the operation: a request whose key
//     another request is running now is answered 409 Conflict with
//     Retry-After ([Wait] makes it wait for the other to end first);
//  3. when the key's response is recorded, replays it: the recorded
//     status, headers and body, with [ReplayedHeader], and the handler is
//     not called; a record of another method or path is answered 422
//     Unprocessable Entity ([ErrMismatch]);
//  4. otherwise calls the handler with the transaction in the request's
//     context, where [advisory.TxFromContext] finds it, and buffers its
//     response. A status that the commit policy commits (below 400 unless
//     [CommitPolicy] says otherwise) is recorded, in the same
//     transaction as the handler's work, and committed before the
//     response is sent; any other status rolls back, records nothing, and
//     is sent as the handler wrote it, so a retry runs the handler again.
//
// So a client that resends a request, because its first response was lost
// on the way, gets the first response again, and the work is done once.
// The whole response is buffered until the commit: Flush does nothing,
// Hijack is not supported, and a body larger than [MaxResponseBytes] rolls
// back and is answered 500 Internal Server Error ([ErrResponseTooLarge]).
// The recorded headers are those the handler set or changed, less
// Set-Cookie; the recorded body is what it wrote.
//
// Records are kept until idempotency.Purge deletes them; the table, its
// creation and its privileges are idempotency's (see
// idempotency.Setup); [IdempotencyTable] names another table. Failures
// are answered as [XactLock] answers them, through [ErrorHandler] and
// [ErrorResponse] when given.
//
// Idempotent panics if db is nil or an option is bad.
func Idempotent(db *sql.DB, opts ...IdempotentOption) func(http.Handler) http.Handler {
	if db == nil {
		panic("httplock: Idempotent: nil *sql.DB")
	}
	o := newOptions(opts)
	if o.idem.checkErr != nil {
		panic(fmt.Sprintf("httplock: Idempotent: %v", o.idem.checkErr))
	}
	runOpts := slices.Clone(o.idem.table)
	if o.Wait > 0 {
		runOpts = append(runOpts, idempotency.Wait(o.Wait))
	}
	if o.TxOptions != nil {
		runOpts = append(runOpts, idempotency.TxOptions(o.TxOptions))
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("httplock: Idempotent: nil http.Handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(o.idem.methods, r.Method) {
				next.ServeHTTP(w, r.WithContext(advisory.NewTxContext(r.Context(), nil)))
				return
			}
			key, err := o.idem.opKey(r)
			switch {
			case err != nil:
				o.fail(w, r, err)
				return
			case key == "":
				next.ServeHTTP(w, r.WithContext(advisory.NewTxContext(r.Context(), nil)))
				return
			}
			var sent *record // the response of a run that rolled back
			res, err := idempotency.Run(r.Context(), db, key, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
				bw := newBufferWriter(w.Header(), o.idem.maxBody, w)
				next.ServeHTTP(bw, r.WithContext(ctx))
				if bw.overflow {
					return nil, ErrResponseTooLarge
				}
				rec := bw.record(r)
				if !o.commit(rec.Status) {
					sent = rec
					return nil, errRolledBack
				}
				return rec.encode()
			}, runOpts...)
			switch {
			case sent != nil && errors.Is(err, errRolledBack):
				sent.write(w, false)
			case err != nil:
				o.fail(w, r, classify(r.Context(), err))
			default:
				rec, derr := decodeRecord(res.Value)
				switch {
				case derr != nil:
					o.fail(w, r, derr)
				case rec.Method != r.Method || rec.Path != r.URL.Path:
					o.fail(w, r, ErrMismatch)
				default:
					rec.write(w, res.Outcome == idempotency.Done)
				}
			}
		})
	}
}

// errRolledBack is what the handler's run returns to roll back a response
// that the commit policy does not commit.
var errRolledBack = errors.New("httplock: rolled back by the commit policy")

// opKey returns the operation key of r: "" when r has no Idempotency-Key
// and none is required, or an error matching ErrBadKey.
func (io *idemOptions) opKey(r *http.Request) (string, error) {
	vals := r.Header.Values(IdempotencyKeyHeader)
	switch {
	case len(vals) == 0 && !io.require:
		return "", nil
	case len(vals) == 0:
		return "", fmt.Errorf("%w: no %s header", ErrBadKey, IdempotencyKeyHeader)
	case len(vals) > 1:
		return "", fmt.Errorf("%w: %d %s headers", ErrBadKey, len(vals), IdempotencyKeyHeader)
	}
	v := vals[0]
	if v == "" || len(v) > MaxIdempotencyKeyLen {
		return "", fmt.Errorf("%w: %s of %d bytes, want 1 to %d", ErrBadKey, IdempotencyKeyHeader, len(v), MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", fmt.Errorf("%w: %s holds a byte that is not printable ASCII", ErrBadKey, IdempotencyKeyHeader)
		}
	}
	if io.scope == nil {
		return v, nil
	}
	s, err := io.scope(r)
	if err != nil {
		return "", keyError(err)
	}
	// The scope's length first, so that no scope and key can spell
	// another pair's operation key.
	key := strconv.Itoa(len(s)) + ":" + s + ":" + v
	if len(key) > idempotency.MaxKeyLen {
		return "", fmt.Errorf("%w: scope and key of %d bytes, longer than %d", ErrBadKey, len(key), idempotency.MaxKeyLen)
	}
	return key, nil
}
