package advisory_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// BenchmarkHashText measures HashText on strings of 8, 64 and 1024 bytes.
func BenchmarkHashText(b *testing.B) {
	for _, size := range []int{8, 64, 1024} {
		s := strings.Repeat("x", size)
		b.Run(fmt.Sprintf("Bytes%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				hashSink = advisory.HashText(s)
			}
		})
	}
}
