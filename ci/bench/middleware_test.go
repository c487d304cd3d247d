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

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

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
// transaction lock, the handler's statement, COMMIT, then the answer), in
// every form of the try ([handForm]), through a real HTTP server: one
// client sending requests one after another, one request of each variant
// per round in an order shuffled every round, and 8 clients at once for
// half a window per variant, in an order shuffled every repeat; each is
// the mean time per request (wall time, for 8 clients), and for one client
// also the median request's. The orders come
// from a seed (PGADVISORY_BENCH_SEED). It reports the middleware's ratios
// to the fastest handler by hand (the one whose median is the least),
// repeat by repeat, with their ranges. Each
// b.N runs middlewareRepeats repeats; run it with -benchtime=1x.
func BenchmarkMiddleware(b *testing.B) {
	for _, s := range pgtest.Servers(b) {
		noteServer(b, s)
		for _, driver := range []string{pgtest.DriverPQ, pgtest.DriverPGX} {
			b.Run(s.Name+"/"+driver, func(b *testing.B) {
				db := s.Open(b, driver)
				db.SetMaxOpenConns(2 * clients)
				db.SetMaxIdleConns(2 * clients)
				names := []string{"middleware"}
				servers := map[string]*httptest.Server{"middleware": httptest.NewServer(handMiddleware(db))}
				for _, f := range handForms {
					names = append(names, f.name)
					servers[f.name] = httptest.NewServer(handByHand(db, f))
				}
				for _, srv := range servers {
					b.Cleanup(srv.Close)
				}
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients}}
				b.Cleanup(client.CloseIdleConnections)
				rng := benchorder.Rand(b)
				seq, p50, par := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
				for range b.N * middlewareRepeats {
					took := make([][]time.Duration, len(names))
					for range sequentialRequests {
						for _, k := range rng.Perm(len(names)) {
							start := time.Now()
							if err := post(b, client, servers[names[k]].URL); err != nil {
								b.Fatal(err)
							}
							took[k] = append(took[k], time.Since(start))
						}
					}
					for k, name := range names {
						var sum time.Duration
						for _, d := range took[k] {
							sum += d
						}
						seq[name] = append(seq[name], float64(sum.Nanoseconds())/1e3/sequentialRequests)
						p50[name] = append(p50[name], float64(quantile(took[k], 0.5).Nanoseconds())/1e3)
					}
					for _, k := range rng.Perm(len(names)) {
						par[names[k]] = append(par[names[k]], concurrent(b, client, servers[names[k]].URL))
					}
				}
				group := s.Name + "/" + driver
				// best is the fastest handler by hand in each repeat.
				var hand []string
				for _, f := range handForms {
					hand = append(hand, f.name)
				}
				best := func(m map[string][]float64) []float64 {
					b, _ := bestForm(m, hand, false)
					return b
				}
				seq["best"], p50["best"], par["best"] = best(seq), best(p50), best(par)
				for _, name := range append(names, "best") {
					for i := range seq[name] {
						record("middleware-1", group, name, seq[name][i])
						record("middleware-1-p50", group, name, p50[name][i])
						record("middleware-8", group, name, par[name][i])
					}
				}
				ratio := func(m map[string][]float64, num, den string) spread {
					r := make([]float64, len(m[num]))
					for i := range r {
						r[i] = m[num][i] / m[den][i]
					}
					return spreadOf(r)
				}
				seqRatio := ratio(seq, "middleware", "best")
				parRatio := ratio(par, "middleware", "best")
				b.ReportMetric(seqRatio.med, "sequential-middleware/best")
				b.ReportMetric(parRatio.med, "8clients-middleware/best")
				b.Logf("%s/%s: one client, µs per request: best by hand %.0f, middleware %.0f, ratio %v; "+
					"8 clients, µs of wall time per request: best by hand %.0f, middleware %.0f, ratio %v",
					s.Name, driver, quantile(seq["best"], 0.5), quantile(seq["middleware"], 0.5), seqRatio,
					quantile(par["best"], 0.5), quantile(par["middleware"], 0.5), parRatio)
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
// by hand, the try in form f.
func handByHand(db *sql.DB, f handForm) http.Handler {
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
		ok, err := f.try(ctx, tx, id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if !ok {
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
