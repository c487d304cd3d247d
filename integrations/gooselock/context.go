package gooselock

import (
	"context"
)

// lossKey is the context key under which [CancelOnLoss] leaves its
// cancel function for the lockers.
type lossKey struct{}

// CancelOnLoss returns a copy of ctx to pass to a goose.Provider's
// methods (Up, UpTo, UpByOne, Down, DownTo, ApplyVersion): a
// [SessionLocker] or [Locker] that takes its lease under it cancels it
// the moment the lease is lost, and context.Cause then returns an error
// matching [advisory.ErrLockLost]. goose runs every migration under the
// context its method was given and hands the locker no other, so this is
// how a loss reaches the migration: the statement in flight is cancelled,
// a migration's transaction is rolled back, and goose stops before the
// next migration. Call cancel when the method has returned.
//
//	ctx, cancel := gooselock.CancelOnLoss(ctx)
//	defer cancel()
//	results, err := provider.Up(ctx)
func CancelOnLoss(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	return context.WithValue(cctx, lossKey{}, cancel), func() { cancel(nil) }
}

// lossCancel returns the cancel function [CancelOnLoss] left in ctx, or
// one that does nothing.
func lossCancel(ctx context.Context) context.CancelCauseFunc {
	if cancel, ok := ctx.Value(lossKey{}).(context.CancelCauseFunc); ok {
		return cancel
	}
	return func(error) {}
}
