package router

import "errors"

// Sentinel errors of package router. Callers test them with errors.Is.
var (
	// ErrBadOptions is wrapped by Options.Validate errors.
	ErrBadOptions = errors.New("router: invalid options")
	// ErrNoRoute means no broker route for the state store topic.
	ErrNoRoute = errors.New("router: no route")
	// ErrUnavailable means the owning broker could not be reached or did
	// not own the shard.
	ErrUnavailable = errors.New("router: shard unavailable")
	// ErrDiskFull means the owning broker refused a write because its
	// disk is full (store.ErrDiskFull; SERVICE_NOT_AVAILABLE with the
	// refusal protocol.RefusalDiskFull from a remote broker). The error
	// also matches ErrUnavailable. Reads still work.
	ErrDiskFull = errors.New("router: shard's disk full")
	// ErrFailed means the broker answered with an error (a stopped shard).
	ErrFailed = errors.New("router: broker error")
	// ErrClosed means the router is closed.
	ErrClosed = errors.New("router: closed")
)
