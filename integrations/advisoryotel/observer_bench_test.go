package advisoryotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/advisoryotel"
)

// BenchmarkObserve measures what the observer adds to one lock taken and
// released: an ObserveAcquire and an ObserveRelease, on the no-op
// providers, and on the SDK's with every span sampled (spans dropped, as
// by an exporter that is not there) and a manual metric reader.
func BenchmarkObserve(b *testing.B) {
	sdk := func(b *testing.B) []advisoryotel.Option {
		tp := sdktrace.NewTracerProvider()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() {
			_ = tp.Shutdown(context.Background())
			_ = mp.Shutdown(context.Background())
		})
		return []advisoryotel.Option{advisoryotel.WithTracerProvider(tp), advisoryotel.WithMeterProvider(mp)}
	}
	cases := []struct {
		name string
		opts func(b *testing.B) []advisoryotel.Option
	}{
		{"Noop", func(*testing.B) []advisoryotel.Option {
			return []advisoryotel.Option{advisoryotel.WithTracerProvider(tracenoop.NewTracerProvider()),
				advisoryotel.WithMeterProvider(noop.NewMeterProvider())}
		}},
		{"SDK", sdk},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			obs, err := advisoryotel.New(c.opts(b)...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			keys := []advisory.Key{advisory.PairKey(7, 42)}
			b.ReportAllocs()
			for b.Loop() {
				obs.ObserveAcquire(ctx, advisory.Acquisition{Op: "lock", Keys: keys, Outcome: advisory.Acquired})
				obs.ObserveRelease(ctx, advisory.Release{Op: "unlock", Keys: keys})
			}
		})
	}
}
