package statestore

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
)

// MQTT-level constants of the protocol (docs/protocols.md, "State store over MQTT 5").
// They are FROZEN: the SDKs hard-code them.
const (
	// RequestTopic is the topic clients publish requests to.
	RequestTopic = "statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke"

	// NotifyTopicPrefix starts every notification topic, and no response
	// topic may start with it.
	NotifyTopicPrefix = "clients/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8"

	// ContentType is the content type of responses and notifications.
	ContentType = "application/octet-stream"

	// ProtocolVersion is the RPC protocol version the store speaks.
	ProtocolVersion = "1.0"

	// Status200 is the __stat value of every engine reply (RESP-level
	// errors included; the clients read them from the payload).
	Status200 = "200"
)

// User property names the protocol reserves.
const (
	PropTimestamp       = "__ts"      // HLC: request clock, response and notification version
	PropFencingToken    = "__ft"      // HLC: fencing token on SET, DEL, VDEL
	PropStatus          = "__stat"    // response status code, required by the clients
	PropProtocolVersion = "__protVer" // "major.minor"; absent means 1.0
	PropSourceID        = "__srcId"   // the sender's client id (informational)
)

// UserProperty is one MQTT 5 user property.
type UserProperty struct{ Key, Value string }

// Reply is the answer to one request.
type Reply struct {
	// Payload is the RESP3 reply ("+OK\r\n", ":-1\r\n", "$3\r\nabc\r\n",
	// "-ERR syntax error\r\n", ...). It may be shared: do not modify it.
	Payload []byte
	// Version goes out as __ts; the zero HLC means no __ts (a GET miss,
	// errors, KEYNOTIFY).
	Version HLC
	// versionText is Version.String() when the engine has it already
	// (the key's, built once per version), else "".
	versionText string
}

// VersionString returns Version.String(), "" for the zero HLC, without
// formatting it again when the engine kept it with the key.
func (r Reply) VersionString() string {
	switch {
	case r.Version.IsZero():
		return ""
	case r.versionText != "":
		return r.versionText
	}
	return r.Version.String()
}

// UserProperties returns the user properties the response must carry:
// __stat=200, __protVer=1.0 and, when Version is set, __ts.
func (r Reply) UserProperties() []UserProperty {
	p := []UserProperty{{PropStatus, Status200}, {PropProtocolVersion, ProtocolVersion}}
	if !r.Version.IsZero() {
		p = append(p, UserProperty{PropTimestamp, r.Version.String()})
	}
	return p
}

// Op is the operation a notification reports.
type Op uint8

// The notification operations. Deletions by DEL, VDEL and expiry are all
// OpDelete ("DELETE" on the wire).
const (
	OpSet    Op = 1
	OpDelete Op = 2
)

// String returns "SET" or "DELETE".
func (o Op) String() string {
	switch o {
	case OpSet:
		return "SET"
	case OpDelete:
		return "DELETE"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Notification is one key change to push to one client that registered a
// KEYNOTIFY covering the key. The front end publishes Payload to Topic at
// QoS 1 straight into that client's session (not by subscription
// matching), with UserProperties and ContentType.
type Notification struct {
	ClientID string // MQTT client id that registered the watch
	Key      string // the changed key (arbitrary bytes)
	Op       Op
	Value    []byte // the new value for OpSet; shared, do not modify
	Version  HLC    // the change's version, sent as __ts
}

// Topic returns the notification topic:
// NotifyTopicPrefix/{HEX(client id)}/command/notify/{HEX(key)} in upper-case
// hex.
func (n Notification) Topic() string { return NotifyTopic(n.ClientID, n.Key) }

// MaxTopicLen is the longest topic MQTT can carry (a UTF-8 string's
// two-byte length).
const MaxTopicLen = 65535

// NotifyTopicLen returns the length of NotifyTopic for a client id and a
// key of these lengths. KEYNOTIFY refuses a key whose topic would be
// longer than MaxTopicLen with ErrQuota: with a 23-byte client id the
// longest key that can be watched is 32,707 bytes.
func NotifyTopicLen(clientIDLen, keyLen int) int {
	return len(NotifyTopicPrefix) + 1 + 2*clientIDLen + len("/command/notify/") + 2*keyLen
}

// NotifyTopic returns the notification topic for a client id and key.
func NotifyTopic(clientID, key string) string {
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(NotifyTopicLen(len(clientID), len(key)))
	b.WriteString(NotifyTopicPrefix)
	b.WriteByte('/')
	for i := 0; i < len(clientID); i++ {
		b.WriteByte(hexdigits[clientID[i]>>4])
		b.WriteByte(hexdigits[clientID[i]&15])
	}
	b.WriteString("/command/notify/")
	for i := 0; i < len(key); i++ {
		b.WriteByte(hexdigits[key[i]>>4])
		b.WriteByte(hexdigits[key[i]&15])
	}
	return b.String()
}

// Payload returns the RESP3 NOTIFY payload:
// "*4\r\n$6\r\nNOTIFY\r\n$3\r\nSET\r\n$5\r\nVALUE\r\n$<n>\r\n<value>\r\n" or
// "*2\r\n$6\r\nNOTIFY\r\n$6\r\nDELETE\r\n".
func (n Notification) Payload() []byte {
	if n.Op != OpSet {
		return notifyDelete
	}
	b := make([]byte, 0, len(notifySetHead)+len(n.Value)+16)
	b = append(b, notifySetHead...)
	return appendBulk(b, n.Value)
}

// UserProperties returns the notification's user properties: __ts.
func (n Notification) UserProperties() []UserProperty {
	return []UserProperty{{PropTimestamp, n.Version.String()}}
}

// ParseNotification reads a NOTIFY payload strictly: exactly one of the two
// shapes Notification.Payload writes. The value aliases b. Errors wrap
// ErrBadNotification.
func ParseNotification(b []byte) (Op, []byte, error) {
	v, err := DecodeReply(b)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBadNotification, err)
	}
	isBulk := func(i int, s string) bool {
		return v.Array[i].Kind == KindBulk && string(v.Array[i].Str) == s
	}
	switch {
	case v.Kind != KindArray:
	case len(v.Array) == 2 && isBulk(0, "NOTIFY") && isBulk(1, "DELETE"):
		return OpDelete, nil, nil
	case len(v.Array) == 4 && isBulk(0, "NOTIFY") && isBulk(1, "SET") && isBulk(2, "VALUE") && v.Array[3].Kind == KindBulk:
		return OpSet, v.Array[3].Str, nil
	}
	return 0, nil, fmt.Errorf("%w: not NOTIFY SET VALUE <v> or NOTIFY DELETE", ErrBadNotification)
}

// ForbiddenResponseTopic reports whether a request's response topic is one
// the protocol forbids: the request topic itself or anything starting with
// NotifyTopicPrefix (the store disconnects such clients).
func ForbiddenResponseTopic(topic string) bool {
	return topic == RequestTopic || strings.HasPrefix(topic, NotifyTopicPrefix)
}

// DedupKey builds the Request.DedupKey for an MQTT request: its
// correlation data and response topic, each preceded by its length as a
// 4-byte big-endian integer, so that distinct pairs never collide.
func DedupKey(correlationData []byte, responseTopic string) []byte {
	return AppendDedupKey(make([]byte, 0, 8+len(correlationData)+len(responseTopic)), correlationData, responseTopic)
}

// AppendDedupKey appends DedupKey(correlationData, responseTopic) to dst
// (a front end builds it in a buffer it already has).
func AppendDedupKey(dst, correlationData []byte, responseTopic string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(correlationData)))
	dst = append(dst, correlationData...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(responseTopic)))
	return append(dst, responseTopic...)
}

// ShardOf maps a key to one of n shards (n >= 1): FNV-1a 32 of the key
// bytes modulo n. The mapping is FROZEN: changing it moves keys between
// shards whose logs already hold them. A KEYNOTIFY ... PREFIX watch spans
// every shard.
func ShardOf(key []byte, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(n))
}

// A write refused because the server's disk is full (docs/durability.md,
// "Full disk"): the response is a 200 whose payload is the protocol's
// quota error, "-ERR the quota has been exceeded" (ErrQuota, which the
// client SDKs map to an error kind of its own, QuotaExceeded),
// and whose user properties add PropStatusMessage, a sentence saying the
// disk is full, and PropRefusal = RefusalDiskFull, which SmartGo's
// client maps to its ErrDiskFull. Reads are served as usual.
const (
	PropRefusal     = "refusal"  // why a request was refused beyond its error text
	RefusalDiskFull = "diskFull" // the server's disk is full: writes are refused
	// DiskFullMessage is the PropStatusMessage of a write refused for a
	// full disk.
	DiskFullMessage = "the state store's disk is full: writes are refused until space is freed; reads still work"
)

// Protocol-version handling (docs/protocols.md): the front end
// checks __protVer before anything else and answers an unsupported major
// with UnsupportedVersionProperties, without executing the request.
const (
	PropStatusMessage        = "__stMsg"          // human-readable status message
	PropRequestProtVer       = "__requestProtVer" // the __protVer the request carried
	PropSupportedMajorVers   = "__supProtMajVer"  // space-separated supported majors
	StatusVersionUnsupported = "505"
)

// ProtocolVersionSupported reports whether a request's __protVer is one
// the store serves: absent counts as "1.0"; otherwise "major.minor" in
// decimal digits with major 1.
func ProtocolVersionSupported(v string, present bool) bool {
	if !present || v == ProtocolVersion {
		return true
	}
	major, minor, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	_, okMinor := parseDigits(minor, 1<<31)
	m, okMajor := parseDigits(major, 1<<31)
	return okMajor && okMinor && m == 1
}

// UnsupportedVersionProperties returns the user properties of the 505
// response to a request whose __protVer is not supported (the payload is
// empty).
func UnsupportedVersionProperties(requested string) []UserProperty {
	return []UserProperty{
		{PropStatus, StatusVersionUnsupported},
		{PropStatusMessage, "request version not supported"},
		{PropRequestProtVer, requested},
		{PropSupportedMajorVers, "1"},
		{PropProtocolVersion, ProtocolVersion},
	}
}
