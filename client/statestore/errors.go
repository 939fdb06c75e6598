package statestore

import "errors"

// Sentinel errors of package statestore (the MQTT application client).
// Callers test them with errors.Is.
var (
	// ErrBadOptions is wrapped by Options.Validate errors.
	ErrBadOptions = errors.New("statestore: invalid options")
	// ErrStatus means the MQTT response carried a non-200 __stat.
	ErrStatus = errors.New("statestore: error status")
	// ErrDiskFull means the server refused a write because its disk is
	// full (the response's refusal property; the error also matches
	// statestore.ErrQuota, the protocol's error text it carries). Reads
	// still work; writes work again once space is freed.
	ErrDiskFull = errors.New("statestore: server disk full")
	// ErrNotLocked means a lock helper call found the lock held by
	// someone else (or not held by us).
	ErrNotLocked = errors.New("statestore: lock not acquired")
)
