package advisory

import (
	"context"
	"log/slog"
)

// NewSlogObserver returns an [Observer] that logs to l: acquisitions and
// clean releases at [slog.LevelDebug], a busy key at [slog.LevelInfo], and
// failures and lost leases at [slog.LevelWarn]. Each record carries the
// operation, the keys, and the wait, outcome or error as attributes. A nil
// l logs to [slog.Default].
func NewSlogObserver(l *slog.Logger) Observer {
	if l == nil {
		l = slog.Default()
	}
	return slogObserver{l}
}

type slogObserver struct{ l *slog.Logger }

func (s slogObserver) ObserveAcquire(ctx context.Context, a Acquisition) {
	level := slog.LevelDebug
	switch a.Outcome {
	case Busy:
		level = slog.LevelInfo
	case TimedOut, Deadlocked, Failed:
		level = slog.LevelWarn
	}
	if !s.l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("op", a.Op), slog.Any("keys", a.Keys),
		slog.Duration("wait", a.Wait), slog.String("outcome", a.Outcome.String()),
	}
	if a.Err != nil {
		attrs = append(attrs, slog.Any("error", a.Err))
	}
	s.l.LogAttrs(ctx, level, "advisory: acquire", attrs...)
}

func (s slogObserver) ObserveRelease(ctx context.Context, r Release) {
	level := slog.LevelDebug
	if r.Err != nil {
		level = slog.LevelWarn
	}
	if !s.l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("op", r.Op), slog.Any("keys", r.Keys)}
	if r.Err != nil {
		attrs = append(attrs, slog.Any("error", r.Err))
	}
	s.l.LogAttrs(ctx, level, "advisory: release", attrs...)
}

func (s slogObserver) ObserveLoss(ctx context.Context, l Loss) {
	s.l.LogAttrs(ctx, slog.LevelWarn, "advisory: lease lost",
		slog.String("key", l.Key.String()), slog.Any("cause", l.Cause))
}
