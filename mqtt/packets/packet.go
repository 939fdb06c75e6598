package packets

// Version is the MQTT protocol level carried in CONNECT.
type Version byte

// Protocol levels. The value is the CONNECT "protocol level" byte (frozen by
// the specifications).
const (
	// Version31 is MQTT 3.1 (protocol name "MQIsdp", level 3). It is encoded
	// and decoded like 3.1.1 except for the CONNECT protocol name.
	Version31 Version = 3
	// Version311 is MQTT 3.1.1 (protocol name "MQTT", level 4).
	Version311 Version = 4
	// Version5 is MQTT 5.0 (protocol name "MQTT", level 5).
	Version5 Version = 5
)

// Valid reports whether v is one of the three supported protocol levels.
func (v Version) Valid() bool { return v >= Version31 && v <= Version5 }

func (v Version) String() string {
	switch v {
	case Version31:
		return "3.1"
	case Version311:
		return "3.1.1"
	case Version5:
		return "5.0"
	}
	return "unknown"
}

// Type is the control packet type: the high nibble of the first byte of the
// fixed header (frozen by the specifications).
type Type byte

// Control packet types.
const (
	TypeConnect     Type = 1
	TypeConnack     Type = 2
	TypePublish     Type = 3
	TypePuback      Type = 4
	TypePubrec      Type = 5
	TypePubrel      Type = 6
	TypePubcomp     Type = 7
	TypeSubscribe   Type = 8
	TypeSuback      Type = 9
	TypeUnsubscribe Type = 10
	TypeUnsuback    Type = 11
	TypePingreq     Type = 12
	TypePingresp    Type = 13
	TypeDisconnect  Type = 14
	// TypeAuth exists in MQTT 5 only; in 3.1.1 the value 15 is reserved.
	TypeAuth Type = 15
)

var typeNames = [16]string{"RESERVED", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL",
	"PUBCOMP", "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH"}

func (t Type) String() string {
	if t < 16 {
		return typeNames[t]
	}
	return "INVALID"
}

// requiredFlags holds the fixed low nibble of every packet type other than
// PUBLISH (whose nibble carries DUP, QoS and RETAIN). Any other value is a
// malformed packet.
var requiredFlags = [16]byte{TypePubrel: 2, TypeSubscribe: 2, TypeUnsubscribe: 2}

// Packet is one decoded MQTT control packet: one of *Connect, *Connack,
// *Publish, *Puback, *Pubrec, *Pubrel, *Pubcomp, *Subscribe, *Suback,
// *Unsubscribe, *Unsuback, *Pingreq, *Pingresp, *Disconnect, *Auth. The set
// is closed.
type Packet interface {
	// Type returns the control packet type.
	Type() Type
	// bodySize returns the remaining length the packet has when encoded at
	// version v, or an error if it cannot be encoded.
	bodySize(v Version) (int, error)
	// appendBody appends the variable header and payload; bodySize must
	// have succeeded for the same v.
	appendBody(dst []byte, v Version) []byte
}

// Connect is the CONNECT packet. For versions below 5 the property fields
// are ignored when encoding and empty when decoded.
type Connect struct {
	// Version is the protocol level the client asked for. Decode fills it
	// from the packet; AppendPacket uses its own version argument and
	// rejects a non-zero Version that differs.
	Version Version
	// CleanStart is "Clean Session" in 3.1.1 and "Clean Start" in 5.
	CleanStart bool
	// KeepAlive is the keep alive interval in seconds (wire field).
	KeepAlive  uint16
	Properties Properties
	ClientID   string

	WillFlag       bool
	WillQoS        byte
	WillRetain     bool
	WillProperties Properties // only the will property set is allowed
	WillTopic      string
	WillPayload    []byte

	UsernameFlag bool
	Username     string
	PasswordFlag bool
	Password     []byte
}

// Connack is the CONNACK packet. In versions below 5, ReasonCode carries the
// 3.1.1 connect return code (ConnectAccepted ... ConnectNotAuthorized); when
// encoding for those versions a v5 reason code (>= 0x80) is mapped with
// V3ConnackCode.
type Connack struct {
	SessionPresent bool
	ReasonCode     ReasonCode
	Properties     Properties
}

// Publish is the PUBLISH packet. Payload is the rest of the packet.
type Publish struct {
	Dup        bool
	QoS        byte
	Retain     bool
	Topic      string
	PacketID   uint16 // present on the wire only when QoS > 0
	Properties Properties
	Payload    []byte
}

// Puback acknowledges a QoS 1 PUBLISH. In versions below 5 only PacketID is
// on the wire.
type Puback struct {
	PacketID   uint16
	ReasonCode ReasonCode
	Properties Properties
}

// Pubrec is the first acknowledgement of a QoS 2 PUBLISH.
type Pubrec struct {
	PacketID   uint16
	ReasonCode ReasonCode
	Properties Properties
}

// Pubrel releases a QoS 2 PUBLISH (fixed header flags 0010).
type Pubrel struct {
	PacketID   uint16
	ReasonCode ReasonCode
	Properties Properties
}

// Pubcomp completes a QoS 2 exchange.
type Pubcomp struct {
	PacketID   uint16
	ReasonCode ReasonCode
	Properties Properties
}

// Subscription is one topic filter of a SUBSCRIBE with its options. In
// versions below 5 only Filter and QoS exist on the wire.
type Subscription struct {
	// Filter is the topic filter as sent, "$share/<group>/<filter>" included
	// (see ParseShared).
	Filter            string
	QoS               byte
	NoLocal           bool
	RetainAsPublished bool
	// RetainHandling is 0 (send retained on subscribe), 1 (only if the
	// subscription is new) or 2 (never).
	RetainHandling byte
}

// Subscribe is the SUBSCRIBE packet (fixed header flags 0010).
type Subscribe struct {
	PacketID      uint16
	Properties    Properties
	Subscriptions []Subscription
}

// Suback is the SUBACK packet: one reason code (granted QoS or failure) per
// subscription. For versions below 5 any failure code is sent as 0x80.
type Suback struct {
	PacketID    uint16
	Properties  Properties
	ReasonCodes []ReasonCode
}

// Unsubscribe is the UNSUBSCRIBE packet (fixed header flags 0010).
type Unsubscribe struct {
	PacketID   uint16
	Properties Properties
	Filters    []string
}

// Unsuback is the UNSUBACK packet. Reason codes exist in version 5 only;
// for lower versions they are not encoded and decode empty.
type Unsuback struct {
	PacketID    uint16
	Properties  Properties
	ReasonCodes []ReasonCode
}

// Pingreq is the PINGREQ packet.
type Pingreq struct{}

// Pingresp is the PINGRESP packet.
type Pingresp struct{}

// Disconnect is the DISCONNECT packet. Below version 5 it has no body.
type Disconnect struct {
	ReasonCode ReasonCode
	Properties Properties
}

// Auth is the AUTH packet (version 5 only).
type Auth struct {
	ReasonCode ReasonCode
	Properties Properties
}

// Type implements Packet.
func (*Connect) Type() Type { return TypeConnect }

// Type implements Packet.
func (*Connack) Type() Type { return TypeConnack }

// Type implements Packet.
func (*Publish) Type() Type { return TypePublish }

// Type implements Packet.
func (*Puback) Type() Type { return TypePuback }

// Type implements Packet.
func (*Pubrec) Type() Type { return TypePubrec }

// Type implements Packet.
func (*Pubrel) Type() Type { return TypePubrel }

// Type implements Packet.
func (*Pubcomp) Type() Type { return TypePubcomp }

// Type implements Packet.
func (*Subscribe) Type() Type { return TypeSubscribe }

// Type implements Packet.
func (*Suback) Type() Type { return TypeSuback }

// Type implements Packet.
func (*Unsubscribe) Type() Type { return TypeUnsubscribe }

// Type implements Packet.
func (*Unsuback) Type() Type { return TypeUnsuback }

// Type implements Packet.
func (*Pingreq) Type() Type { return TypePingreq }

// Type implements Packet.
func (*Pingresp) Type() Type { return TypePingresp }

// Type implements Packet.
func (*Disconnect) Type() Type { return TypeDisconnect }

// Type implements Packet.
func (*Auth) Type() Type { return TypeAuth }
