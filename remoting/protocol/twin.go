package protocol

import "strconv"

// Twin request codes: SmartGo's own, in its private range beside the
// state store's (9100-9102, 9110) and the admin extensions' (9200-9203);
// RocketMQ's codes stay far below (TestSmartGoCodesDistinct keeps the
// private codes apart). The bodies are the twin engine's wire formats
// (twin/doc.go: "Wire request", "Wire reply", "Wire notification", "Wire
// watch"); this package carries them as bytes so it needs no twin types.
const (
	// TwinInvoke is one twin operation for one shard, sent by a client
	// (back end, bridge, admin) to the broker that owns the shard. Header
	// field shard! (decimal queue id of the twin topic on that broker);
	// body: a twin wire request. Answered by Success with a twin wire
	// reply body (the operation's own status, 200 to 4xx, is inside), or
	// by ServiceNotAvailable when the broker does not own the shard (a
	// slave, a wrong route) or could not append (nothing changed), or
	// SystemError when the shard stopped after a failure or the body is
	// malformed. With header field replica=true (MarkTwinReplicaRead) a
	// read (no logged operation) is served by a slave too, from the state
	// its replica applied last: what a client reads while the shard's
	// master is down.
	TwinInvoke RequestCode = 9120
	// TwinNotify is a one-way request from a broker to a connection that
	// watches twins: body a twin wire notification (desired changes).
	TwinNotify RequestCode = 9121
	// TwinWatch adds, removes or replaces the twins a connection watches
	// on a broker, or only pings it: body a twin wire watch request.
	// Answered by Success with the body FORMAT (1) then EPOCH (uint64
	// big-endian): a number the broker draws when it opens its twin
	// shards, so a client that sees it change re-registers its watches
	// (the broker restarted or a slave took over).
	TwinWatch RequestCode = 9122
)

// NewTwinRequest builds the TwinInvoke command of a twin wire request for
// shard.
func NewTwinRequest(shard int32, body []byte) *Command {
	c := NewRequest(TwinInvoke, nil, body)
	c.ExtFields = ExtFields{"shard": strconv.FormatInt(int64(shard), 10)}
	return c
}

// TwinShard returns the shard header field of a TwinInvoke command.
// Errors wrap ErrMissingField or ErrBadField.
func TwinShard(c *Command) (int32, error) {
	fr := fieldReader{f: c.ExtFields, hdr: "TwinRequest"}
	shard := fr.i32("shard", true)
	return shard, fr.err
}

// MarkTwinReplicaRead lets a slave serve the TwinInvoke read c from its
// replica (header field replica=true).
func MarkTwinReplicaRead(c *Command) { c.ExtFields["replica"] = "true" }

// TwinReplicaRead reports whether c may be served by a slave's replica.
func TwinReplicaRead(c *Command) bool { return c.ExtFields["replica"] == "true" }
