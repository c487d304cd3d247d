package pgxlock

import "errors"

// Errors for bad arguments. Every other error is one of package
// advisory's: match it with errors.Is against advisory's sentinels.
var (
	errNilConn = errors.New("pgxlock: nil conn")
	errNilTx   = errors.New("pgxlock: nil pgx.Tx")
	errNilPool = errors.New("pgxlock: nil *pgxpool.Pool")
	errNilFunc = errors.New("pgxlock: nil fn")
)
