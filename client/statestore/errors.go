package statestore

import "errors"

// Sentinel errors of package statestore (the MQTT application client).
// Callers test them with errors.Is.
var (
	// ErrBadOptions is wrapped by Options.Validate errors.
	ErrBadOptions = errors.New("statestore: invalid options")
	// ErrStatus means the MQTT response carried a non-200 __stat.
	ErrStatus = errors.New("statestore: error status")
	// ErrNotLocked means a lock helper call found the lock held by
	// someone else (or not held by us).
	ErrNotLocked = errors.New("statestore: lock not acquired")
)
