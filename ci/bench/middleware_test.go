package bench_test

import (
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

const (
	// sequentialRequests is how many requests one client sends per
	// variant per repeat.
	sequentialRequests = 300
	// middlewareRepeats is how many repeats, the variants interleaved.
	middlewareRepeats = 5
)

// BenchmarkMiddleware measures httplock.XactLock against a handler that
// does the same transaction by hand (BEGIN, a try of the order's
// transaction lock, the handler's statement, COMMIT, then the answer),
// through a real HTTP server: one client sending requests one after
// another, the two variants in turn, and 8 clients at once for a second; each is the mean time per
// request (wall time, for 8 clients). The variants interleave within each repeat; it reports the
// middleware's ratios to the handler by hand, with their ranges. Each b.N
// runs middlewareRepeats repeats; run it with -benchtime=1x.
func BenchmarkMiddleware(b *testing.B) {
	for _, s := range pgtest.Servers(b) {
		for _, driver := range []string{pgtest.DriverPQ, pgtest.DriverPGX} {
			b.Run(s.Name+"/"+driver, func(b *testing.B) {
				db := s.Open(b, driver)
				db.SetMaxOpenConns(2 * clients)
				db.SetMaxIdleConns(2 * clients)
				servers := map[string]*httptest.Server{
					"by-hand":    httptest.NewServer(handByHand(db, driver == pgtest.DriverPGX)),
					"middleware": httptest.NewServer(handMiddleware(db)),
				}
				for _, srv := range servers {
					b.Cleanup(srv.Close)
				}
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients}}
				b.Cleanup(client.CloseIdleConnections)
				names := []string{"by-hand", "middleware"}
				seq, par := map[string][]float64{}, map[string][]float64{}
				for r := range b.N * middlewareRepeats {
					// One request of each in turn, the order rotated
					// every repeat.
					var took [2]time.Duration
					for range sequentialRequests {
						for j := range names {
							k := (j + r) % len(names)
							start := time.Now()
							if err := post(b, client, servers[names[k]].URL); err != nil {
								b.Fatal(err)
							}
							took[k] += time.Since(start)
						}
					}
					for k, name := range names {
						seq[name] = append(seq[name], float64(took[k].Microseconds())/sequentialRequests)
					}
					for j := range names {
						name := names[(j+r)%len(names)]
						par[name] = append(par[name], concurrent(b, client, servers[name].URL))
					}
				}
				ratio := func(m map[string][]float64, num, den string) spread {
					r := make([]float64, len(m[num]))
					for i := range r {
						r[i] = m[num][i] / m[den][i]
					}
					return spreadOf(r)
				}
				seqRatio := ratio(seq, "middleware", "by-hand")
				parRatio := ratio(par, "middleware", "by-hand")
				b.ReportMetric(seqRatio.med, "sequential-middleware/by-hand")
				b.ReportMetric(parRatio.med, "8clients-middleware/by-hand")
				b.Logf("%s/%s: one client, µs per request: by hand %.0f, middleware %.0f, ratio %v; "+
					"8 clients, µs of wall time per request: by hand %.0f, middleware %.0f, ratio %v",
					s.Name, driver, quantile(seq["by-hand"], 0.5), quantile(seq["middleware"], 0.5), seqRatio,
					quantile(par["by-hand"], 0.5), quantile(par["middleware"], 0.5), parRatio)
			})
		}
	}
}

// work is the handler's own statement, in the request's transaction.
const work = "SELECT 1"

// handMiddleware serves POST /orders/{id} behind httplock.XactLock.
func handMiddleware(db *sql.DB) http.Handler {
	mux := http.NewServeMux()
	lock := httplock.XactLock(db, httplock.PathInt64Key("id"))
	mux.Handle("POST /orders/{id}", lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := advisory.TxFromContext(r.Context())
		if _, err := tx.ExecContext(r.Context(), work); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})))
	return mux
}

// handByHand serves POST /orders/{id} with the same transaction written
// by hand, in the fastest form for the driver: the key as $1 on pgx
// (param), in the text otherwise.
func handByHand(db *sql.DB, param bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			http.Error(w, "bad id", http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer tx.Rollback()
		var res sql.Result
		if param {
			res, err = tx.ExecContext(ctx, "SELECT 1 WHERE pg_try_advisory_xact_lock($1)", id)
		} else {
			res, err = tx.ExecContext(ctx, "SELECT 1 WHERE pg_try_advisory_xact_lock("+strconv.FormatInt(id, 10)+")")
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if n, _ := res.RowsAffected(); n != 1 {
			http.Error(w, "busy", http.StatusConflict)
			return
		}
		if _, err := tx.ExecContext(ctx, work); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := tx.Commit(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	return mux
}

// post sends one request for a random order and checks it got 200.
func post(b *testing.B, client *http.Client, url string) error {
	resp, err := client.Post(fmt.Sprintf("%s/orders/%d", url, rand.Int64N(1_000_000_000)+1), "text/plain", nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// concurrent returns the mean wall time per request, in µs, of clients
// clients sending requests for half a window.
func concurrent(b *testing.B, client *http.Client, url string) float64 {
	n, took := onClients(b, window/2, func() error { return post(b, client, url) })
	return float64(took.Microseconds()) / float64(n)
}
