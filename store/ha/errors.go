package ha

import "errors"

// Sentinel errors of package ha. Callers test them with errors.Is.
var (
	// ErrInvalidOptions wraps every Options.Validate failure.
	ErrInvalidOptions = errors.New("ha: invalid options")
	// ErrClosed: the server was closed while the call waited.
	ErrClosed = errors.New("ha: closed")
	// ErrProtocol: the peer sent bytes that are not the HA protocol (bad
	// magic, unknown version, oversized chunk or string).
	ErrProtocol = errors.New("ha: protocol violation")
	// ErrMismatch: the peer belongs to another broker group or uses
	// another commitlog segment size; nothing is replicated.
	ErrMismatch = errors.New("ha: peer is not this broker group's master/slave")
	// ErrSlaveAhead: the slave's commitlog extends beyond the master's
	// (wrong master, or the master lost data). The slave refuses to
	// replicate rather than truncate its own log.
	ErrSlaveAhead = errors.New("ha: slave commitlog is ahead of the master")
	// ErrSlaveBehind: the slave's commitlog ends below the master's first
	// stored offset, so it cannot resume; start the slave with an empty store.
	ErrSlaveBehind = errors.New("ha: slave commitlog ends before the master's first segment")
	// ErrOffsetMismatch: a chunk does not start at the slave's commitlog
	// end; the slave drops the connection and reconnects.
	ErrOffsetMismatch = errors.New("ha: chunk offset does not match the slave's end")
	// ErrSlaveNotAvailable: a sync master has no healthy slave (none
	// connected, or the best one is more than Options.FallBehindMax behind).
	ErrSlaveNotAvailable = errors.New("ha: no slave available")
	// ErrSlaveAckTimeout: no slave acknowledged the offset in time (the
	// message is stored on the master).
	ErrSlaveAckTimeout = errors.New("ha: slave acknowledgement timed out")
	// ErrStaleEpoch (controlled mode): the two sides disagree on the
	// master epoch: a slave following a newer master than this one, or a
	// master older than the one the slave was told to follow (it may not
	// know yet that it was elected). The slave retries.
	ErrStaleEpoch = errors.New("ha: master epoch is stale")
	// ErrDiverged (controlled mode): the slave's log and the master's have
	// nothing in common that the slave still stores (the consistent offset
	// is below its first offset); it keeps its data and needs an operator
	// (an empty store replicates from scratch).
	ErrDiverged = errors.New("ha: slave log diverges from the master's before its first stored offset")
	// errShort: more bytes are needed (decoders).
	errShort = errors.New("ha: short buffer")
)
