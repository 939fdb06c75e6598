package controller

import "errors"

// Errors of the controller package. Callers test them with errors.Is.
var (
	// ErrInvalidOptions wraps every Options.Validate error.
	ErrInvalidOptions = errors.New("controller: invalid options")
	// ErrCorrupt: a Raft log, stable-state or snapshot file does not
	// decode (bad checksum in the middle of the log, unknown format byte,
	// malformed JSON). The replica refuses to start rather than forget
	// entries it may have acknowledged.
	ErrCorrupt = errors.New("controller: corrupt state")
	// ErrClosed: the controller or its log store is closed.
	ErrClosed = errors.New("controller: closed")
	// ErrNotLeader: a write was asked of a replica that is not the Raft
	// leader.
	ErrNotLeader = errors.New("controller: not the leader")
)
