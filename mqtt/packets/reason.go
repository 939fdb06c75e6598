package packets

// ReasonCode is an MQTT 5 reason code (one byte on the wire; values frozen by
// the specification). Codes below 0x80 mean success, 0x80 and above failure.
// Several names share a value (0x00 is Success, Normal disconnection and
// Granted QoS 0).
type ReasonCode byte

// MQTT 5 reason codes.
const (
	ReasonSuccess                             ReasonCode = 0x00
	ReasonNormalDisconnection                 ReasonCode = 0x00
	ReasonGrantedQoS0                         ReasonCode = 0x00
	ReasonGrantedQoS1                         ReasonCode = 0x01
	ReasonGrantedQoS2                         ReasonCode = 0x02
	ReasonDisconnectWithWill                  ReasonCode = 0x04
	ReasonNoMatchingSubscribers               ReasonCode = 0x10
	ReasonNoSubscriptionExisted               ReasonCode = 0x11
	ReasonContinueAuthentication              ReasonCode = 0x18
	ReasonReauthenticate                      ReasonCode = 0x19
	ReasonUnspecifiedError                    ReasonCode = 0x80
	ReasonMalformedPacket                     ReasonCode = 0x81
	ReasonProtocolError                       ReasonCode = 0x82
	ReasonImplementationSpecificError         ReasonCode = 0x83
	ReasonUnsupportedProtocolVersion          ReasonCode = 0x84
	ReasonClientIdentifierNotValid            ReasonCode = 0x85
	ReasonBadUserNameOrPassword               ReasonCode = 0x86
	ReasonNotAuthorized                       ReasonCode = 0x87
	ReasonServerUnavailable                   ReasonCode = 0x88
	ReasonServerBusy                          ReasonCode = 0x89
	ReasonBanned                              ReasonCode = 0x8A
	ReasonServerShuttingDown                  ReasonCode = 0x8B
	ReasonBadAuthenticationMethod             ReasonCode = 0x8C
	ReasonKeepAliveTimeout                    ReasonCode = 0x8D
	ReasonSessionTakenOver                    ReasonCode = 0x8E
	ReasonTopicFilterInvalid                  ReasonCode = 0x8F
	ReasonTopicNameInvalid                    ReasonCode = 0x90
	ReasonPacketIdentifierInUse               ReasonCode = 0x91
	ReasonPacketIdentifierNotFound            ReasonCode = 0x92
	ReasonReceiveMaximumExceeded              ReasonCode = 0x93
	ReasonTopicAliasInvalid                   ReasonCode = 0x94
	ReasonPacketTooLarge                      ReasonCode = 0x95
	ReasonMessageRateTooHigh                  ReasonCode = 0x96
	ReasonQuotaExceeded                       ReasonCode = 0x97
	ReasonAdministrativeAction                ReasonCode = 0x98
	ReasonPayloadFormatInvalid                ReasonCode = 0x99
	ReasonRetainNotSupported                  ReasonCode = 0x9A
	ReasonQoSNotSupported                     ReasonCode = 0x9B
	ReasonUseAnotherServer                    ReasonCode = 0x9C
	ReasonServerMoved                         ReasonCode = 0x9D
	ReasonSharedSubscriptionsNotSupported     ReasonCode = 0x9E
	ReasonConnectionRateExceeded              ReasonCode = 0x9F
	ReasonMaximumConnectTime                  ReasonCode = 0xA0
	ReasonSubscriptionIdentifiersNotSupported ReasonCode = 0xA1
	ReasonWildcardSubscriptionsNotSupported   ReasonCode = 0xA2
)

// MQTT 3.1/3.1.1 CONNACK return codes (carried in Connack.ReasonCode for
// those versions).
const (
	ConnectAccepted                     ReasonCode = 0x00
	ConnectRefusedProtocolVersion       ReasonCode = 0x01
	ConnectRefusedIdentifierRejected    ReasonCode = 0x02
	ConnectRefusedServerUnavailable     ReasonCode = 0x03
	ConnectRefusedBadUsernameOrPassword ReasonCode = 0x04
	ConnectRefusedNotAuthorized         ReasonCode = 0x05
)

// V3SubackFailure is the only failure return code of a 3.1.1 SUBACK.
const V3SubackFailure ReasonCode = 0x80

var reasonNames = map[ReasonCode]string{
	0x00: "success", 0x01: "granted QoS 1", 0x02: "granted QoS 2", 0x04: "disconnect with will message",
	0x10: "no matching subscribers", 0x11: "no subscription existed", 0x18: "continue authentication",
	0x19: "re-authenticate", 0x80: "unspecified error", 0x81: "malformed packet", 0x82: "protocol error",
	0x83: "implementation specific error", 0x84: "unsupported protocol version",
	0x85: "client identifier not valid", 0x86: "bad user name or password", 0x87: "not authorized",
	0x88: "server unavailable", 0x89: "server busy", 0x8A: "banned", 0x8B: "server shutting down",
	0x8C: "bad authentication method", 0x8D: "keep alive timeout", 0x8E: "session taken over",
	0x8F: "topic filter invalid", 0x90: "topic name invalid", 0x91: "packet identifier in use",
	0x92: "packet identifier not found", 0x93: "receive maximum exceeded", 0x94: "topic alias invalid",
	0x95: "packet too large", 0x96: "message rate too high", 0x97: "quota exceeded",
	0x98: "administrative action", 0x99: "payload format invalid", 0x9A: "retain not supported",
	0x9B: "QoS not supported", 0x9C: "use another server", 0x9D: "server moved",
	0x9E: "shared subscriptions not supported", 0x9F: "connection rate exceeded",
	0xA0: "maximum connect time", 0xA1: "subscription identifiers not supported",
	0xA2: "wildcard subscriptions not supported",
}

// String returns the specification's name of the v5 reason code.
func (r ReasonCode) String() string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return "unknown reason code"
}

// IsError reports whether r is a failure code (0x80 or above).
func (r ReasonCode) IsError() bool { return r >= 0x80 }

// reasonSet is a set of reason codes, one bit per value.
type reasonSet [4]uint64

func (s reasonSet) has(r ReasonCode) bool { return s[r>>6]&(1<<(r&63)) != 0 }

func newReasonSet(codes ...ReasonCode) reasonSet {
	var s reasonSet
	for _, c := range codes {
		s[c>>6] |= 1 << (c & 63)
	}
	return s
}

// validReasons lists, per packet type, the v5 reason codes the specification
// allows in it.
var validReasons = [16]reasonSet{
	TypeConnack: newReasonSet(0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A,
		0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F),
	TypePuback:   newReasonSet(0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99),
	TypePubrec:   newReasonSet(0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99),
	TypePubrel:   newReasonSet(0x00, 0x92),
	TypePubcomp:  newReasonSet(0x00, 0x92),
	TypeSuback:   newReasonSet(0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2),
	TypeUnsuback: newReasonSet(0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91),
	TypeDisconnect: newReasonSet(0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E,
		0x8F, 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F,
		0xA0, 0xA1, 0xA2),
	TypeAuth: newReasonSet(0x00, 0x18, 0x19),
}

// v3Connack and v3Suback are the return codes 3.1.1 allows.
var (
	v3Connack = newReasonSet(0, 1, 2, 3, 4, 5)
	v3Suback  = newReasonSet(0, 1, 2, 0x80)
)

// ValidReasonCode reports whether the specification allows reason code r in
// a packet of type t at version v (for versions below 5: the CONNACK return
// codes 0-5 and the SUBACK codes 0, 1, 2, 0x80).
func ValidReasonCode(t Type, v Version, r ReasonCode) bool {
	if t > 15 {
		return false
	}
	if v < Version5 {
		switch t {
		case TypeConnack:
			return v3Connack.has(r)
		case TypeSuback:
			return v3Suback.has(r)
		}
		return false
	}
	return validReasons[t].has(r)
}

// V3ConnackCode maps an MQTT 5 CONNACK reason code onto the nearest 3.1.1
// connect return code, so one server code path can refuse clients of both
// versions. Values 0-5 are returned unchanged (they already are 3.1.1
// codes).
func V3ConnackCode(r ReasonCode) ReasonCode {
	switch {
	case r <= 5:
		return r
	case r == ReasonUnsupportedProtocolVersion:
		return ConnectRefusedProtocolVersion
	case r == ReasonClientIdentifierNotValid:
		return ConnectRefusedIdentifierRejected
	case r == ReasonBadUserNameOrPassword || r == ReasonBadAuthenticationMethod:
		return ConnectRefusedBadUsernameOrPassword
	case r == ReasonNotAuthorized || r == ReasonBanned:
		return ConnectRefusedNotAuthorized
	}
	return ConnectRefusedServerUnavailable
}
