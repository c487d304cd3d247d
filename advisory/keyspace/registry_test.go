package keyspace_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

var _ error = (*keyspace.ConflictError)(nil)

var (
	nsBilling  = advisory.Namespace{ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs"}
	nsPayments = advisory.Namespace{ID: 8, Name: "payments", Owner: "team-payments"}
)

func TestRegister(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ns        advisory.Namespace
		wantErr   error
		wantMsg   string // a substring of the error
		wantOther []advisory.Namespace
	}{
		{name: "New", ns: advisory.Namespace{ID: 9, Name: "reports"}},
		{name: "SameAgain", ns: nsBilling},
		{name: "SameIDOtherName", ns: advisory.Namespace{ID: 7, Name: "invoices", Owner: "team-x"},
			wantErr:   keyspace.ErrConflict,
			wantMsg:   `keyspace: namespace conflict: ID 7 is already 7 "billing" (owner team-payments); cannot register 7 "invoices" (owner team-x)`,
			wantOther: []advisory.Namespace{nsBilling}},
		{name: "SameNameOtherID", ns: advisory.Namespace{ID: 70, Name: "billing"},
			wantErr:   keyspace.ErrConflict,
			wantMsg:   `keyspace: namespace conflict: name "billing" is already 7 "billing" (owner team-payments); cannot register 70 "billing"`,
			wantOther: []advisory.Namespace{nsBilling}},
		{name: "SameIDAndNameOtherOwner", ns: advisory.Namespace{ID: 7, Name: "billing", Owner: "team-x", Doc: "invoice runs"},
			wantErr:   keyspace.ErrConflict,
			wantMsg:   `keyspace: namespace 7 "billing" registered twice with different owner or doc: owner "team-payments" vs "team-x"`,
			wantOther: []advisory.Namespace{nsBilling}},
		{name: "SameIDAndNameOtherDoc", ns: advisory.Namespace{ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoices"},
			wantErr:   keyspace.ErrConflict,
			wantMsg:   `keyspace: namespace 7 "billing" registered twice with different owner or doc: doc "invoice runs" vs "invoices"`,
			wantOther: []advisory.Namespace{nsBilling}},
		{name: "SameIDAndNameOtherOwnerAndDoc", ns: advisory.Namespace{ID: 7, Name: "billing"},
			wantErr: keyspace.ErrConflict,
			wantMsg: `keyspace: namespace 7 "billing" registered twice with different owner or doc: ` +
				`owner "team-payments" vs "", doc "invoice runs" vs ""`,
			wantOther: []advisory.Namespace{nsBilling}},
		{name: "IDOfOneNameOfAnother", ns: advisory.Namespace{ID: 7, Name: "payments"},
			wantErr: keyspace.ErrConflict, wantMsg: `name "payments" is already 8 "payments"`,
			wantOther: []advisory.Namespace{nsBilling, nsPayments}},
		{name: "ReservedID", ns: advisory.Namespace{ID: math.MinInt32, Name: "mine"},
			wantErr: keyspace.ErrReserved, wantMsg: "IDs -2147483648 to -2147483393"},
		{name: "ReservedRangeEnd", ns: advisory.Namespace{ID: keyspace.ReservedMaxID, Name: "mine"},
			wantErr: keyspace.ErrReserved},
		{name: "ReservedName", ns: advisory.Namespace{ID: 1, Name: "pgadvisory"},
			wantErr: keyspace.ErrReserved},
		{name: "NoName", ns: advisory.Namespace{ID: 1}, wantMsg: "keyspace: namespace has no name: ID 1"},
		{name: "JustAboveReserved", ns: advisory.Namespace{ID: keyspace.ReservedMaxID + 1, Name: "low"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r keyspace.Registry
			r.MustRegister(nsBilling)
			r.MustRegister(nsPayments)
			err := r.Register(tt.ns)
			if tt.wantErr == nil && tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Register(%+v) = %v", tt.ns, err)
				}
				if got, ok := r.Lookup(tt.ns.Key(1)); !ok || got != tt.ns {
					t.Errorf("Lookup after Register = %+v, %v", got, ok)
				}
				return
			}
			if err == nil {
				t.Fatalf("Register(%+v) = nil, want an error", tt.ns)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Register(%+v) = %v, want errors.Is %v", tt.ns, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Register(%+v) = %q, want it to contain %q", tt.ns, err, tt.wantMsg)
			}
			if !strings.HasPrefix(err.Error(), "keyspace: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			var ce *keyspace.ConflictError
			if len(tt.wantOther) > 0 {
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *ConflictError", err)
				}
				if ce.Namespace != tt.ns || ce.Existing != tt.wantOther[0] {
					t.Errorf("ConflictError = %+v, want %+v against %+v", ce, tt.ns, tt.wantOther[0])
				}
				for _, other := range tt.wantOther {
					if !strings.Contains(err.Error(), fmt.Sprintf("%d %q", other.ID, other.Name)) {
						t.Errorf("error %q does not name %+v", err, other)
					}
				}
			}
			if got := r.Namespaces(); len(got) != 2 {
				t.Errorf("a refused namespace was registered: %+v", got)
			}
		})
	}
}

func TestConflictErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *keyspace.ConflictError
		want string
	}{
		{name: "SameID", err: &keyspace.ConflictError{Namespace: advisory.Namespace{ID: 7, Name: "ledger"}, Existing: nsBilling},
			want: `keyspace: namespace conflict: ID 7 is already 7 "billing" (owner team-payments); cannot register 7 "ledger"`},
		{name: "SameNameRegisteredBy", err: &keyspace.ConflictError{Namespace: advisory.Namespace{ID: 70, Name: "billing"},
			Existing: nsBilling, RegisteredBy: "billing-api"},
			want: `keyspace: namespace conflict: name "billing" is already 7 "billing" (owner team-payments), ` +
				`registered by "billing-api"; cannot register 70 "billing"`},
		{name: "TwiceOwner", err: &keyspace.ConflictError{Namespace: advisory.Namespace{ID: 7, Name: "billing", Owner: "b", Doc: "d"},
			Existing: advisory.Namespace{ID: 7, Name: "billing", Owner: "a", Doc: "d"}},
			want: `keyspace: namespace 7 "billing" registered twice with different owner or doc: owner "a" vs "b"`},
		{name: "TwiceDocRegisteredBy", err: &keyspace.ConflictError{Namespace: advisory.Namespace{ID: 7, Name: "billing", Doc: "new"},
			Existing: advisory.Namespace{ID: 7, Name: "billing", Doc: "old"}, RegisteredBy: "billing-api"},
			want: `keyspace: namespace 7 "billing" registered twice with different owner or doc: doc "old" vs "new"; registered by "billing-api"`},
		{name: "TwiceAlike", err: &keyspace.ConflictError{Namespace: nsPayments, Existing: nsPayments},
			want: `keyspace: namespace 8 "payments" registered twice with different owner or doc: owner "team-payments", doc ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() =\n%s\nwant\n%s", got, tt.want)
			}
			if !errors.Is(tt.err, keyspace.ErrConflict) {
				t.Errorf("%v does not match ErrConflict", tt.err)
			}
		})
	}
}

func TestMustRegisterPanics(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	if got := r.MustRegister(nsBilling); got != nsBilling {
		t.Errorf("MustRegister returned %+v, want %+v", got, nsBilling)
	}
	defer func() {
		v := recover()
		err, ok := v.(error)
		if !ok || !errors.Is(err, keyspace.ErrConflict) || !strings.HasPrefix(err.Error(), "keyspace: ") {
			t.Errorf("recovered %v, want an advisory conflict error", v)
		}
	}()
	r.MustRegister(advisory.Namespace{ID: 7, Name: "other"})
	t.Error("MustRegister did not panic")
}

func TestLookup(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	r.MustRegister(nsBilling)
	tests := []struct {
		name    string
		key     advisory.Key
		want    advisory.Namespace
		wantMsg string
	}{
		{name: "Registered", key: advisory.PairKey(7, -1), want: nsBilling},
		{name: "NameKey", key: nsBilling.NameKey("nightly"), want: nsBilling},
		{name: "Unregistered", key: advisory.PairKey(9, 1), wantMsg: "keyspace: no namespace: no namespace has ID 9 (key 9:1)"},
		{name: "Int64", key: advisory.Int64Key(7<<32 | 1),
			wantMsg: "keyspace: no namespace: 30064771073 is a bigint key; only pair keys belong to a namespace"},
		{name: "Library", key: advisory.PairKey(math.MinInt32, 1),
			want: advisory.Namespace{ID: math.MinInt32, Name: "pgadvisory"}},
		{name: "ReservedUnused", key: advisory.PairKey(math.MinInt32+1, 1), wantMsg: "no namespace has ID -2147483647"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := r.Lookup(tt.key)
			gotR, err := r.Resolve(tt.key)
			if got != gotR || ok != (err == nil) {
				t.Errorf("Lookup and Resolve disagree: %+v, %v vs %+v, %v", got, ok, gotR, err)
			}
			if tt.wantMsg != "" {
				if ok || !errors.Is(err, keyspace.ErrNoNamespace) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("Resolve(%v) = %+v, %v; want ErrNoNamespace containing %q", tt.key, gotR, err, tt.wantMsg)
				}
				return
			}
			if !ok || got.ID != tt.want.ID || got.Name != tt.want.Name {
				t.Errorf("Lookup(%v) = %+v, %v; want %+v", tt.key, got, ok, tt.want)
			}
		})
	}
}

func TestNamespacesSorted(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	if got := r.Namespaces(); len(got) != 0 {
		t.Errorf("zero Registry has namespaces %+v", got)
	}
	for _, id := range []int32{30, -5, 12, 0} {
		r.MustRegister(advisory.Namespace{ID: id, Name: fmt.Sprint("ns", id)})
	}
	var ids []int32
	for _, ns := range r.Namespaces() {
		ids = append(ids, ns.ID)
	}
	if fmt.Sprint(ids) != "[-5 0 12 30]" {
		t.Errorf("Namespaces IDs = %v, want [-5 0 12 30]", ids)
	}
}

// TestRegisterConcurrent registers from many goroutines at once: each ID
// and each name ends up with exactly one owner.
func TestRegisterConcurrent(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for g := range 8 {
		wg.Go(func() {
			for id := range int32(50) {
				err := r.Register(advisory.Namespace{ID: id, Name: fmt.Sprint("ns", id), Owner: fmt.Sprint("g", g)})
				switch {
				case err == nil:
					mu.Lock()
					wins++
					mu.Unlock()
				case !errors.Is(err, keyspace.ErrConflict):
					t.Errorf("Register: %v", err)
				}
				r.Lookup(advisory.PairKey(id, 0))
			}
		})
	}
	wg.Wait()
	if wins != 50 || len(r.Namespaces()) != 50 {
		t.Errorf("%d registrations won, %d namespaces; want 50 and 50", wins, len(r.Namespaces()))
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	first := keyspace.Default()
	if first == nil {
		t.Fatal("Default() = nil")
	}
	if second := keyspace.Default(); second != first {
		t.Errorf("Default() = %p, then %p; want the same registry", first, second)
	}
	if _, ok := keyspace.Default().Lookup(advisory.PairKey(math.MinInt32, 1)); !ok {
		t.Error("Default() does not know the library's namespace")
	}
}
