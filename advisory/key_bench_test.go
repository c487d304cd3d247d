package advisory_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// BenchmarkNameKey measures deriving a key from a name on the client,
// which replaces a round trip to the server's hashtext.
func BenchmarkNameKey(b *testing.B) {
	for _, name := range []string{"orders", "tenant-1234/invoice-567890", strings.Repeat("x", 256)} {
		b.Run("Len"+strconv.Itoa(len(name)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(name)))
			var k advisory.Key
			for b.Loop() {
				k = advisory.NameKey(7, name)
			}
			if !k.IsPair() {
				b.Fatal("NameKey did not give a pair key")
			}
		})
	}
}
