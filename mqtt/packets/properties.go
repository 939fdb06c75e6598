package packets

import (
	"fmt"
	"math/bits"
)

// PropID is an MQTT 5 property identifier (frozen by the specification).
type PropID byte

// Property identifiers.
const (
	PropPayloadFormat          PropID = 0x01 // byte, PUBLISH, will
	PropMessageExpiry          PropID = 0x02 // uint32 seconds, PUBLISH, will
	PropContentType            PropID = 0x03 // string, PUBLISH, will
	PropResponseTopic          PropID = 0x08 // string (topic name), PUBLISH, will
	PropCorrelationData        PropID = 0x09 // binary, PUBLISH, will
	PropSubscriptionIdentifier PropID = 0x0B // varint, PUBLISH (repeatable), SUBSCRIBE
	PropSessionExpiry          PropID = 0x11 // uint32 seconds, CONNECT, CONNACK, DISCONNECT
	PropAssignedClientID       PropID = 0x12 // string, CONNACK
	PropServerKeepAlive        PropID = 0x13 // uint16 seconds, CONNACK
	PropAuthMethod             PropID = 0x15 // string, CONNECT, CONNACK, AUTH
	PropAuthData               PropID = 0x16 // binary, CONNECT, CONNACK, AUTH
	PropRequestProblemInfo     PropID = 0x17 // byte 0/1, CONNECT
	PropWillDelay              PropID = 0x18 // uint32 seconds, will
	PropRequestResponseInfo    PropID = 0x19 // byte 0/1, CONNECT
	PropResponseInfo           PropID = 0x1A // string, CONNACK
	PropServerReference        PropID = 0x1C // string, CONNACK, DISCONNECT
	PropReasonString           PropID = 0x1F // string, acks, CONNACK, DISCONNECT, AUTH
	PropReceiveMaximum         PropID = 0x21 // uint16 > 0, CONNECT, CONNACK
	PropTopicAliasMaximum      PropID = 0x22 // uint16, CONNECT, CONNACK
	PropTopicAlias             PropID = 0x23 // uint16 > 0, PUBLISH
	PropMaximumQoS             PropID = 0x24 // byte 0/1, CONNACK
	PropRetainAvailable        PropID = 0x25 // byte 0/1, CONNACK
	PropUser                   PropID = 0x26 // string pair (repeatable), all but PINGs
	PropMaximumPacketSize      PropID = 0x27 // uint32 > 0, CONNECT, CONNACK
	PropWildcardSubAvailable   PropID = 0x28 // byte 0/1, CONNACK
	PropSubIDAvailable         PropID = 0x29 // byte 0/1, CONNACK
	PropSharedSubAvailable     PropID = 0x2A // byte 0/1, CONNACK
)

// PropSet is a set of property identifiers, bit i standing for PropID i.
type PropSet uint64

// Has reports whether id is in the set.
func (s PropSet) Has(id PropID) bool { return id < 64 && s&(1<<id) != 0 }

// Add puts id in the set.
func (s *PropSet) Add(id PropID) { *s |= 1 << (id & 63) }

// Remove takes id out of the set.
func (s *PropSet) Remove(id PropID) { *s &^= 1 << (id & 63) }

func setOf(ids ...PropID) PropSet {
	var s PropSet
	for _, id := range ids {
		s.Add(id)
	}
	return s
}

// UserProperty is one User Property: a name and a value, both UTF-8.
type UserProperty struct {
	Key, Value string
}

// Properties holds the MQTT 5 properties of a packet (or of a will).
//
// Present records which single-valued properties are present: a field is
// encoded only when its identifier is in Present, so that a zero value
// (Session Expiry 0, Retain Available 0) can be sent. User and
// SubscriptionIdentifiers are present when non-empty; user properties keep
// their order and duplicates. Decoding sets Present exactly.
type Properties struct {
	Present PropSet

	PayloadFormat       byte
	RequestProblemInfo  byte
	RequestResponseInfo byte
	MaximumQoS          byte
	RetainAvailable     byte
	WildcardSubAvail    byte
	SubIDAvailable      byte
	SharedSubAvailable  byte

	ServerKeepAlive   uint16
	ReceiveMaximum    uint16
	TopicAliasMaximum uint16
	TopicAlias        uint16

	MessageExpiry     uint32
	SessionExpiry     uint32
	WillDelay         uint32
	MaximumPacketSize uint32

	ContentType      string
	ResponseTopic    string
	AssignedClientID string
	AuthMethod       string
	ResponseInfo     string
	ServerReference  string
	ReasonString     string

	CorrelationData []byte
	AuthData        []byte

	// SubscriptionIdentifiers: at most one in SUBSCRIBE; a server may put
	// several in one PUBLISH for overlapping subscriptions. Each is in
	// 1..MaxVarInt.
	SubscriptionIdentifiers []uint32
	User                    []UserProperty
}

// propKind is the wire data type of a property.
type propKind byte

const (
	kindNone propKind = iota
	kindByte
	kindU16
	kindU32
	kindVarInt
	kindString
	kindBinary
	kindPair
)

var propKinds = [64]propKind{
	PropPayloadFormat: kindByte, PropMessageExpiry: kindU32, PropContentType: kindString,
	PropResponseTopic: kindString, PropCorrelationData: kindBinary, PropSubscriptionIdentifier: kindVarInt,
	PropSessionExpiry: kindU32, PropAssignedClientID: kindString, PropServerKeepAlive: kindU16,
	PropAuthMethod: kindString, PropAuthData: kindBinary, PropRequestProblemInfo: kindByte,
	PropWillDelay: kindU32, PropRequestResponseInfo: kindByte, PropResponseInfo: kindString,
	PropServerReference: kindString, PropReasonString: kindString, PropReceiveMaximum: kindU16,
	PropTopicAliasMaximum: kindU16, PropTopicAlias: kindU16, PropMaximumQoS: kindByte,
	PropRetainAvailable: kindByte, PropUser: kindPair, PropMaximumPacketSize: kindU32,
	PropWildcardSubAvailable: kindByte, PropSubIDAvailable: kindByte, PropSharedSubAvailable: kindByte,
}

var (
	reasonAndUser = setOf(PropReasonString, PropUser)
	willAllowed   = setOf(PropPayloadFormat, PropMessageExpiry, PropContentType, PropResponseTopic,
		PropCorrelationData, PropWillDelay, PropUser)
	allowedProps = [16]PropSet{
		TypeConnect: setOf(PropSessionExpiry, PropAuthMethod, PropAuthData, PropRequestProblemInfo,
			PropRequestResponseInfo, PropReceiveMaximum, PropTopicAliasMaximum, PropUser, PropMaximumPacketSize),
		TypeConnack: setOf(PropSessionExpiry, PropAssignedClientID, PropServerKeepAlive, PropAuthMethod,
			PropAuthData, PropResponseInfo, PropServerReference, PropReasonString, PropReceiveMaximum,
			PropTopicAliasMaximum, PropMaximumQoS, PropRetainAvailable, PropUser, PropMaximumPacketSize,
			PropWildcardSubAvailable, PropSubIDAvailable, PropSharedSubAvailable),
		TypePublish: setOf(PropPayloadFormat, PropMessageExpiry, PropContentType, PropResponseTopic,
			PropCorrelationData, PropSubscriptionIdentifier, PropTopicAlias, PropUser),
		TypePuback:      reasonAndUser,
		TypePubrec:      reasonAndUser,
		TypePubrel:      reasonAndUser,
		TypePubcomp:     reasonAndUser,
		TypeSubscribe:   setOf(PropSubscriptionIdentifier, PropUser),
		TypeSuback:      reasonAndUser,
		TypeUnsubscribe: setOf(PropUser),
		TypeUnsuback:    reasonAndUser,
		TypeDisconnect:  setOf(PropSessionExpiry, PropServerReference, PropReasonString, PropUser),
		TypeAuth:        setOf(PropAuthMethod, PropAuthData, PropReasonString, PropUser),
	}
)

// AllowedProperties returns the properties the specification allows in a
// packet of type t (User and Subscription Identifier included).
func AllowedProperties(t Type) PropSet {
	if t > 15 {
		return 0
	}
	return allowedProps[t]
}

// AllowedWillProperties returns the properties allowed in CONNECT's will
// property block, which is validated separately from the CONNECT's own.
func AllowedWillProperties() PropSet { return willAllowed }

func allowedFor(t Type, will bool) PropSet {
	if will {
		return willAllowed
	}
	return allowedProps[t]
}

// mask returns the identifiers to encode: Present plus User and
// Subscription Identifier when their slices are non-empty.
func (p *Properties) mask() PropSet {
	m := p.Present &^ setOf(PropUser, PropSubscriptionIdentifier)
	if len(p.User) > 0 {
		m.Add(PropUser)
	}
	if len(p.SubscriptionIdentifiers) > 0 {
		m.Add(PropSubscriptionIdentifier)
	}
	return m
}

func (p *Properties) byteValue(id PropID) *byte {
	switch id {
	case PropPayloadFormat:
		return &p.PayloadFormat
	case PropRequestProblemInfo:
		return &p.RequestProblemInfo
	case PropRequestResponseInfo:
		return &p.RequestResponseInfo
	case PropMaximumQoS:
		return &p.MaximumQoS
	case PropRetainAvailable:
		return &p.RetainAvailable
	case PropWildcardSubAvailable:
		return &p.WildcardSubAvail
	case PropSubIDAvailable:
		return &p.SubIDAvailable
	case PropSharedSubAvailable:
		return &p.SharedSubAvailable
	}
	return nil
}

func (p *Properties) u16Value(id PropID) *uint16 {
	switch id {
	case PropServerKeepAlive:
		return &p.ServerKeepAlive
	case PropReceiveMaximum:
		return &p.ReceiveMaximum
	case PropTopicAliasMaximum:
		return &p.TopicAliasMaximum
	case PropTopicAlias:
		return &p.TopicAlias
	}
	return nil
}

func (p *Properties) u32Value(id PropID) *uint32 {
	switch id {
	case PropMessageExpiry:
		return &p.MessageExpiry
	case PropSessionExpiry:
		return &p.SessionExpiry
	case PropWillDelay:
		return &p.WillDelay
	case PropMaximumPacketSize:
		return &p.MaximumPacketSize
	}
	return nil
}

func (p *Properties) stringValue(id PropID) *string {
	switch id {
	case PropContentType:
		return &p.ContentType
	case PropResponseTopic:
		return &p.ResponseTopic
	case PropAssignedClientID:
		return &p.AssignedClientID
	case PropAuthMethod:
		return &p.AuthMethod
	case PropResponseInfo:
		return &p.ResponseInfo
	case PropServerReference:
		return &p.ServerReference
	case PropReasonString:
		return &p.ReasonString
	}
	return nil
}

func (p *Properties) binaryValue(id PropID) *[]byte {
	switch id {
	case PropCorrelationData:
		return &p.CorrelationData
	case PropAuthData:
		return &p.AuthData
	}
	return nil
}

// decodeProperties reads a property length and the property block that
// follows into p, rejecting identifiers not allowed for (t, will),
// duplicates and invalid values.
func decodeProperties(r *reader, p *Properties, t Type, will bool, v Version) error {
	n, res := r.varInt()
	if res != varIntOK {
		return newError(ErrMalformed, t, v, "bad property length")
	}
	if n > r.remaining() {
		return newError(ErrMalformed, t, v, "property length %d exceeds the packet", n)
	}
	blk := reader{b: r.b[r.off : r.off+n]}
	r.off += n
	allowed := allowedFor(t, will)
	var userBuf [8]UserProperty
	var subBuf [4]uint32
	users, subs := userBuf[:0], subBuf[:0]
	// scratch: the user properties go straight into the caller's array
	// (NextScratchAlias), users only without one.
	var scratch []UserProperty
	if r.users != nil {
		scratch = (*r.users)[:0]
	}
	topicChecked := false
	for blk.remaining() > 0 {
		raw, res := blk.varInt()
		if res != varIntOK {
			return newError(ErrMalformed, t, v, "bad property identifier")
		}
		if raw >= 64 || propKinds[raw] == kindNone {
			return newError(ErrMalformed, t, v, "unknown property 0x%02X", raw)
		}
		id := PropID(raw)
		if !allowed.Has(id) {
			where := t.String()
			if will {
				where = "will properties"
			}
			return newError(ErrMalformed, t, v, "property 0x%02X not allowed in %s", raw, where)
		}
		if p.Present.Has(id) && id != PropUser && (id != PropSubscriptionIdentifier || t != TypePublish) {
			return newError(ErrProtocol, t, v, "property 0x%02X included more than once", raw)
		}
		ok := true
		switch propKinds[id] {
		case kindByte:
			*p.byteValue(id), ok = blk.u8()
		case kindU16:
			*p.u16Value(id), ok = blk.u16()
		case kindU32:
			*p.u32Value(id), ok = blk.u32()
		case kindVarInt:
			sid, res := blk.varInt()
			if res != varIntOK {
				return newError(ErrMalformed, t, v, "bad subscription identifier")
			}
			subs = append(subs, uint32(sid))
		case kindString:
			b, bok := blk.binary()
			if id == PropResponseTopic && bok && plainTopic(b) {
				// A valid topic name, checked in one pass: checkValues
				// need not look at it again.
				p.ResponseTopic, topicChecked = aliasString(b), true
				break
			}
			if bok && !validUTF8(b) {
				return newError(ErrMalformed, t, v, "property 0x%02X is not valid UTF-8", raw)
			}
			*p.stringValue(id), ok = aliasString(b), bok
		case kindBinary:
			*p.binaryValue(id), ok = blk.binary()
		case kindPair:
			k, kok, kvalid := blk.str()
			val, vok, vvalid := blk.str()
			ok = kok && vok
			if ok && !(kvalid && vvalid) {
				return newError(ErrMalformed, t, v, "user property is not valid UTF-8")
			}
			if r.users != nil {
				scratch = append(scratch, UserProperty{Key: k, Value: val})
			} else {
				users = append(users, UserProperty{Key: k, Value: val})
			}
		}
		if !ok {
			return newError(ErrMalformed, t, v, "property 0x%02X runs past the property block", raw)
		}
		p.Present.Add(id)
	}
	p.Present.Remove(PropUser)
	p.Present.Remove(PropSubscriptionIdentifier)
	switch {
	case len(scratch) > 0:
		*r.users = scratch
		p.User = scratch[:len(scratch):len(scratch)]
	case len(users) > 0:
		p.User = make([]UserProperty, len(users))
		copy(p.User, users)
	}
	if len(subs) > 0 {
		p.SubscriptionIdentifiers = make([]uint32, len(subs))
		copy(p.SubscriptionIdentifiers, subs)
	}
	var skip PropSet
	if topicChecked {
		skip.Add(PropResponseTopic)
	}
	if detail, err := p.checkValues(t, true, skip); err != nil {
		return newError(err, t, v, "%s", detail)
	}
	return nil
}

// flagPropIDs are the byte properties whose value must be 0 or 1, and
// flagProps their set.
var flagPropIDs = [...]PropID{PropPayloadFormat, PropRequestProblemInfo, PropRequestResponseInfo,
	PropMaximumQoS, PropRetainAvailable, PropWildcardSubAvailable, PropSubIDAvailable, PropSharedSubAvailable}

var flagProps = func() PropSet {
	var m PropSet
	for _, id := range flagPropIDs {
		m.Add(id)
	}
	return m
}()

// checkValues applies the value rules of the specification. It returns a
// detail and the sentinel error, or nil. Decoding and encoding share it, so what one
// accepts the other accepts. decoded says the strings were read by
// reader.str, which checked their UTF-8 already. The properties in skip
// were checked already (a decoded response topic plainTopic passed).
func (p *Properties) checkValues(t Type, decoded bool, skip PropSet) (string, error) {
	m := p.Present &^ skip
	if m&flagProps != 0 {
		for _, id := range flagPropIDs {
			if m.Has(id) && *p.byteValue(id) > 1 {
				return fmt.Sprintf("property 0x%02X must be 0 or 1, not %d", byte(id), *p.byteValue(id)), ErrProtocol
			}
		}
	}
	if m.Has(PropReceiveMaximum) && p.ReceiveMaximum == 0 {
		return "receive maximum 0", ErrProtocol
	}
	if m.Has(PropMaximumPacketSize) && p.MaximumPacketSize == 0 {
		return "maximum packet size 0", ErrProtocol
	}
	if m.Has(PropAuthData) && !m.Has(PropAuthMethod) {
		return "authentication data without authentication method", ErrProtocol
	}
	if m.Has(PropTopicAlias) && p.TopicAlias == 0 {
		return "topic alias 0", ErrTopicAliasInvalid
	}
	if m.Has(PropResponseTopic) && !(decoded && validDecodedTopicName(p.ResponseTopic) || !decoded && ValidTopicName(p.ResponseTopic)) {
		return "response topic is not a valid topic name", ErrTopicNameInvalid
	}
	for _, id := range p.SubscriptionIdentifiers {
		if id == 0 || id > MaxVarInt {
			return fmt.Sprintf("subscription identifier %d out of range", id), ErrProtocol
		}
	}
	if t == TypeSubscribe && len(p.SubscriptionIdentifiers) > 1 {
		return "more than one subscription identifier in SUBSCRIBE", ErrProtocol
	}
	return "", nil
}

// encodedLen returns the length of the property block for (t, will) without
// its length prefix, or an error if p cannot be encoded there.
func (p *Properties) encodedLen(t Type, will bool) (int, error) {
	m := p.mask()
	if bad := m &^ allowedFor(t, will); bad != 0 {
		return 0, newError(ErrEncode, t, Version5, "property 0x%02X not allowed", bits.TrailingZeros64(uint64(bad)))
	}
	if detail, err := p.checkValues(t, false, 0); err != nil {
		return 0, newError(ErrEncode, t, Version5, "%s", detail)
	}
	n := 0
	for mm := uint64(m); mm != 0; mm &= mm - 1 {
		id := PropID(bits.TrailingZeros64(mm))
		switch propKinds[id] {
		case kindByte:
			n += 2
		case kindU16:
			n += 3
		case kindU32:
			n += 5
		case kindVarInt:
			for _, s := range p.SubscriptionIdentifiers {
				n += 1 + varIntLen(int(s))
			}
		case kindString:
			s := *p.stringValue(id)
			if len(s) > maxString {
				return 0, newError(ErrEncode, t, Version5, "property 0x%02X longer than 65535 bytes", byte(id))
			}
			n += 3 + len(s)
		case kindBinary:
			b := *p.binaryValue(id)
			if len(b) > maxString {
				return 0, newError(ErrEncode, t, Version5, "property 0x%02X longer than 65535 bytes", byte(id))
			}
			n += 3 + len(b)
		case kindPair:
			for _, u := range p.User {
				if len(u.Key) > maxString || len(u.Value) > maxString {
					return 0, newError(ErrEncode, t, Version5, "user property longer than 65535 bytes")
				}
				n += 5 + len(u.Key) + len(u.Value)
			}
		}
	}
	return n, nil
}

// rawLen is encodedLen without the checks, for a Properties that passed
// them.
func (p *Properties) rawLen() int {
	n := 0
	for mm := uint64(p.mask()); mm != 0; mm &= mm - 1 {
		id := PropID(bits.TrailingZeros64(mm))
		switch propKinds[id] {
		case kindByte:
			n += 2
		case kindU16:
			n += 3
		case kindU32:
			n += 5
		case kindVarInt:
			for _, s := range p.SubscriptionIdentifiers {
				n += 1 + varIntLen(int(s))
			}
		case kindString:
			n += 3 + len(*p.stringValue(id))
		case kindBinary:
			n += 3 + len(*p.binaryValue(id))
		case kindPair:
			for _, u := range p.User {
				n += 5 + len(u.Key) + len(u.Value)
			}
		}
	}
	return n
}

// appendProperties appends the property length n (from encodedLen) and the
// properties in ascending identifier order; repeated ones keep their order.
func (p *Properties) appendProperties(dst []byte, n int) []byte {
	dst = appendVarInt(dst, n)
	for mm := uint64(p.mask()); mm != 0; mm &= mm - 1 {
		id := PropID(bits.TrailingZeros64(mm))
		switch propKinds[id] {
		case kindByte:
			dst = append(dst, byte(id), *p.byteValue(id))
		case kindU16:
			dst = appendUint16(append(dst, byte(id)), *p.u16Value(id))
		case kindU32:
			dst = appendUint32(append(dst, byte(id)), *p.u32Value(id))
		case kindVarInt:
			for _, s := range p.SubscriptionIdentifiers {
				dst = appendVarInt(append(dst, byte(id)), int(s))
			}
		case kindString:
			dst = appendString(append(dst, byte(id)), *p.stringValue(id))
		case kindBinary:
			dst = appendBinary(append(dst, byte(id)), *p.binaryValue(id))
		case kindPair:
			for _, u := range p.User {
				dst = appendString(appendString(append(dst, byte(id)), u.Key), u.Value)
			}
		}
	}
	return dst
}

func (p *Properties) visit(f *detacher) {
	f.str(&p.ContentType)
	f.str(&p.ResponseTopic)
	f.str(&p.AssignedClientID)
	f.str(&p.AuthMethod)
	f.str(&p.ResponseInfo)
	f.str(&p.ServerReference)
	f.str(&p.ReasonString)
	f.bin(&p.CorrelationData)
	f.bin(&p.AuthData)
	for i := range p.User {
		f.str(&p.User[i].Key)
		f.str(&p.User[i].Value)
	}
}
