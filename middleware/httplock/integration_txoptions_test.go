package httplock_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestIntegrationTxOptions checks, on real servers, that TxOptions reach
// the request's transaction: the handler reads the isolation level and
// the read-only flag the server reports for it. A mock ignores both, so
// only a server proves this.
func TestIntegrationTxOptions(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		tests := []struct {
			name string
			opts *sql.TxOptions
			want string
		}{
			{"Default", nil, "read committed off"},
			{"SerializableReadOnly", &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}, "serializable on"},
			{"RepeatableRead", &sql.TxOptions{Isolation: sql.LevelRepeatableRead}, "repeatable read off"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					tx, _ := advisory.TxFromContext(r.Context())
					var iso, ro string
					if err := tx.QueryRowContext(r.Context(),
						"SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')").Scan(&iso, &ro); err != nil {
						http.Error(w, err.Error(), http.StatusInternalServerError)
						return
					}
					fmt.Fprintf(w, "%s %s", iso, ro)
				})
				srv := serve(t, routers[0].route(tg.DB, testNamespace(t), []httplock.Option{httplock.TxOptions(tt.opts)}, h))
				if r := fetch(srv.URL + "/orders/42"); r.status != http.StatusOK || r.body != tt.want {
					t.Errorf("got %d %q (%v), want 200 %q", r.status, r.body, r.err, tt.want)
				}
			})
		}
		if n := tg.DB.Stats().InUse; n != 0 {
			t.Errorf("%d connections still in use", n)
		}
	})
}
