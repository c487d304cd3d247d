package advisory_test

import (
	"fmt"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// HashText computes on the client the key that hand-written SQL gets from
// the server with hashtext, so both sides take the same lock:
//
//	SELECT pg_advisory_lock(hashtext('abc'));
func ExampleHashText() {
	fmt.Println(advisory.HashText("abc"))
	fmt.Println(advisory.HashTextExtended("abc", 0))
	// Output:
	// -785388649
	// -6747756470228489321
}
