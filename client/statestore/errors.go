package statestore

import "errors"

// Sentinel errors of package statestore (client side). Callers test them
// with errors.Is.
var (
	// ErrBadOptions is wrapped by Options.Validate errors.
	ErrBadOptions = errors.New("statestore: invalid options")
	// ErrNoRoute means no broker route for the state store topic.
	ErrNoRoute = errors.New("statestore: no route")
	// ErrUnavailable means the owning broker could not be reached or did
	// not own the shard.
	ErrUnavailable = errors.New("statestore: shard unavailable")
	// ErrFailed means the broker answered with an error (a stopped shard).
	ErrFailed = errors.New("statestore: broker error")
	// ErrClosed means the router or client is closed.
	ErrClosed = errors.New("statestore: closed")
	// ErrStatus means the MQTT response carried a non-200 __stat.
	ErrStatus = errors.New("statestore: error status")
	// ErrNotLocked means a lock helper call found the lock held by
	// someone else (or not held by us).
	ErrNotLocked = errors.New("statestore: lock not acquired")
)
