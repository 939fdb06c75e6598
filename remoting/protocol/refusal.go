package protocol

// Why a broker refused a request, beyond its response code. RocketMQ
// answers a send to a broker whose disk is full with SERVICE_NOT_AVAILABLE,
// the code of every "cannot write now" (a slave, a master without its
// lease, a closed store); a SmartGo broker adds the extFields entry
// FieldRefusal naming the cause, so a client can tell a full disk (quota
// exceeded: retrying elsewhere or later may help, retrying here now will
// not) from the rest. Other clients ignore the field.
//
// The broker also tells its registries (which producers ask before they
// send): while its disk is full, the queue data it registers lose
// PermWrite, as RocketMQ's do, and carry PermDiskFull. A producer that
// finds no writable queue for a topic whose every master says so knows
// the send fails for a full disk without sending it. The bit is SmartGo's;
// RocketMQ clients and tools test single bits and ignore it.
const (
	// FieldRefusal is the response extFields key naming the refusal's cause.
	FieldRefusal = "refusal"
	// RefusalDiskFull: the broker's store refuses writes, its disk is past
	// the full mark (or a write found no space).
	RefusalDiskFull = "diskFull"
)

// PermDiskFull is the queue-data permission bit a SmartGo broker sets
// (with PermWrite cleared) while its disk is full.
const PermDiskFull int32 = 16
