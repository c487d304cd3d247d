package mock

// ServerError returns a driver error carrying SQLSTATE code, as the errors
// of lib/pq and pgx do, for WillReturnError. advisory recognises the
// server's errors by SQLSTATE, so a lock statement that returns
// ServerError("55P03") fails with [advisory.ErrLockTimeout], "40P01" with
// [advisory.ErrDeadlock] and "53200" with [advisory.ErrLockTableFull].
func ServerError(code string) error { return &serverError{code: code} }

// serverError is the error [ServerError] returns.
type serverError struct{ code string }

func (e *serverError) Error() string    { return "mock: server error (SQLSTATE " + e.code + ")" }
func (e *serverError) SQLState() string { return e.code }
