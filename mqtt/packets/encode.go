package packets

import (
	"slices"
	"strings"
)

// Size returns the number of bytes p takes when encoded at version v, fixed
// header included: what to compare with the peer's Maximum Packet Size. A
// server that finds a response too large may drop its Reason String
// (Properties.Present.Remove(PropReasonString)) and User properties and ask
// again, as the specification allows; that policy is the server's.
func Size(p Packet, v Version) (int, error) {
	n, err := bodySize(p, v)
	if err != nil {
		return 0, err
	}
	return 1 + varIntLen(n) + n, nil
}

func bodySize(p Packet, v Version) (int, error) {
	if p == nil {
		return 0, newError(ErrEncode, 0, v, "nil packet")
	}
	if !v.Valid() {
		return 0, newError(ErrEncode, p.Type(), v, "unsupported version %d", byte(v))
	}
	n, err := p.bodySize(v)
	if err != nil {
		return 0, err
	}
	if n > MaxVarInt {
		return 0, newError(ErrEncode, p.Type(), v, "remaining length %d over the protocol maximum", n)
	}
	return n, nil
}

// AppendPacket appends the encoding of p at version v to dst and returns the
// extended slice. It allocates only if dst lacks capacity (then once). On
// error dst is returned unchanged. Properties are encoded only for version 5;
// for lower versions they, and reason codes with no 3.1.1 equivalent, are
// left out. A packet is checked before anything is written: values out of
// range, properties the packet type does not allow, missing packet
// identifiers and strings over 65535 bytes fail with ErrEncode.
func AppendPacket(dst []byte, p Packet, v Version) ([]byte, error) {
	n, err := bodySize(p, v)
	if err != nil {
		return dst, err
	}
	t := p.Type()
	first := byte(t)<<4 | requiredFlags[t]
	if pub, ok := p.(*Publish); ok {
		first = pub.firstByte()
	}
	return p.appendBody(appendFixedHeader(dst, first, n), v), nil
}

// appendFixedHeader appends the fixed header of a packet whose body has n
// bytes, with room for the body.
func appendFixedHeader(dst []byte, first byte, n int) []byte {
	dst = slices.Grow(dst, 1+varIntLen(n)+n)
	return appendVarInt(append(dst, first), n)
}

func (p *Publish) firstByte() byte {
	first := byte(TypePublish)<<4 | p.QoS<<1
	if p.Dup {
		first |= 0x08
	}
	if p.Retain {
		first |= 0x01
	}
	return first
}

// checkBody checks a body size computed by a packet's bodySize.
func checkBody(t Type, v Version, n int, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	if n > MaxVarInt {
		return 0, newError(ErrEncode, t, v, "remaining length %d over the protocol maximum", n)
	}
	return n, nil
}

// AppendPublish is AppendPacket for a PUBLISH. p does not escape: a
// sender encodes a PUBLISH built on its stack without allocating it.
func AppendPublish(dst []byte, p *Publish, v Version) ([]byte, error) {
	if !v.Valid() {
		return dst, newError(ErrEncode, TypePublish, v, "unsupported version %d", byte(v))
	}
	n, pn, err := p.sizes(v)
	if n, err = checkBody(TypePublish, v, n, err); err != nil {
		return dst, err
	}
	return p.appendBodyProps(appendFixedHeader(dst, p.firstByte(), n), v, pn), nil
}

// PublishSize is Size for a PUBLISH, without p escaping.
func PublishSize(p *Publish, v Version) (int, error) {
	if !v.Valid() {
		return 0, newError(ErrEncode, TypePublish, v, "unsupported version %d", byte(v))
	}
	n, err := p.bodySize(v)
	if n, err = checkBody(TypePublish, v, n, err); err != nil {
		return 0, err
	}
	return 1 + varIntLen(n) + n, nil
}

var noProperties Properties

// AppendAck is AppendPacket for PUBACK, PUBREC, PUBREL or PUBCOMP (t)
// given by its fields (props may be nil), without building a packet
// value: the hot acknowledgements are encoded without allocating.
func AppendAck(dst []byte, t Type, id uint16, rc ReasonCode, props *Properties, v Version) ([]byte, error) {
	if t < TypePuback || t > TypePubcomp {
		return dst, newError(ErrEncode, t, v, "not an acknowledgement")
	}
	if !v.Valid() {
		return dst, newError(ErrEncode, t, v, "unsupported version %d", byte(v))
	}
	if props == nil {
		props = &noProperties
	}
	n, err := ackSize(t, v, id, rc, props)
	if n, err = checkBody(t, v, n, err); err != nil {
		return dst, err
	}
	return appendAck(appendFixedHeader(dst, byte(t)<<4|requiredFlags[t], n), v, id, rc, props), nil
}

// propsSize returns the bytes the property block of (t, will) takes with its
// length prefix, and the block length alone.
func propsSize(p *Properties, t Type, will bool, v Version) (total, n int, err error) {
	if v < Version5 {
		return 0, 0, nil
	}
	if n, err = p.encodedLen(t, will); err != nil {
		return 0, 0, err
	}
	return varIntLen(n) + n, n, nil
}

func stringErr(t Type, v Version, what string) error {
	return newError(ErrEncode, t, v, "%s longer than 65535 bytes", what)
}

func (c *Connect) protocol(v Version) string {
	if v == Version31 {
		return protocolMQIsdp
	}
	return protocolMQTT
}

func (c *Connect) bodySize(v Version) (int, error) {
	const t = TypeConnect
	switch {
	case c.Version != 0 && c.Version != v:
		return 0, newError(ErrEncode, t, v, "Connect.Version %d differs from the encoding version", c.Version)
	case c.WillQoS > 2:
		return 0, newError(ErrEncode, t, v, "will QoS %d", c.WillQoS)
	case !c.WillFlag && (c.WillQoS != 0 || c.WillRetain):
		return 0, newError(ErrEncode, t, v, "will QoS or retain without will flag")
	case v < Version5 && c.PasswordFlag && !c.UsernameFlag:
		return 0, newError(ErrEncode, t, v, "password without user name before MQTT 5")
	case len(c.ClientID) > maxString:
		return 0, stringErr(t, v, "client identifier")
	}
	n := 2 + len(c.protocol(v)) + 1 + 1 + 2 + 2 + len(c.ClientID)
	pt, _, err := propsSize(&c.Properties, t, false, v)
	if err != nil {
		return 0, err
	}
	n += pt
	if c.WillFlag {
		if !ValidTopicName(c.WillTopic) {
			return 0, newError(ErrEncode, t, v, "will topic %q is not a valid topic name", c.WillTopic)
		}
		if len(c.WillPayload) > maxString {
			return 0, stringErr(t, v, "will payload")
		}
		wt, _, err := propsSize(&c.WillProperties, t, true, v)
		if err != nil {
			return 0, err
		}
		n += wt + 2 + len(c.WillTopic) + 2 + len(c.WillPayload)
	}
	if c.UsernameFlag {
		if len(c.Username) > maxString {
			return 0, stringErr(t, v, "user name")
		}
		n += 2 + len(c.Username)
	}
	if c.PasswordFlag {
		if len(c.Password) > maxString {
			return 0, stringErr(t, v, "password")
		}
		n += 2 + len(c.Password)
	}
	return n, nil
}

func (c *Connect) appendBody(dst []byte, v Version) []byte {
	dst = append(appendString(dst, c.protocol(v)), byte(v))
	var flags byte
	if c.CleanStart {
		flags |= 0x02
	}
	if c.WillFlag {
		flags |= 0x04 | c.WillQoS<<3
		if c.WillRetain {
			flags |= 0x20
		}
	}
	if c.PasswordFlag {
		flags |= 0x40
	}
	if c.UsernameFlag {
		flags |= 0x80
	}
	dst = appendUint16(append(dst, flags), c.KeepAlive)
	if v == Version5 {
		dst = c.Properties.appendProperties(dst, c.Properties.rawLen())
	}
	dst = appendString(dst, c.ClientID)
	if c.WillFlag {
		if v == Version5 {
			dst = c.WillProperties.appendProperties(dst, c.WillProperties.rawLen())
		}
		dst = appendBinary(appendString(dst, c.WillTopic), c.WillPayload)
	}
	if c.UsernameFlag {
		dst = appendString(dst, c.Username)
	}
	if c.PasswordFlag {
		dst = appendBinary(dst, c.Password)
	}
	return dst
}

// connackCode returns the code to put on the wire at version v.
func (c *Connack) connackCode(v Version) ReasonCode {
	if v < Version5 {
		return V3ConnackCode(c.ReasonCode)
	}
	return c.ReasonCode
}

func (c *Connack) bodySize(v Version) (int, error) {
	const t = TypeConnack
	rc := c.connackCode(v)
	if !ValidReasonCode(t, v, rc) {
		return 0, newError(ErrEncode, t, v, "reason code 0x%02X not allowed", byte(rc))
	}
	if c.SessionPresent && rc != 0 {
		return 0, newError(ErrEncode, t, v, "session present with a refusal")
	}
	pt, _, err := propsSize(&c.Properties, t, false, v)
	return 2 + pt, err
}

func (c *Connack) appendBody(dst []byte, v Version) []byte {
	var flags byte
	if c.SessionPresent {
		flags = 1
	}
	dst = append(dst, flags, byte(c.connackCode(v)))
	if v == Version5 {
		dst = c.Properties.appendProperties(dst, c.Properties.rawLen())
	}
	return dst
}

func (p *Publish) bodySize(v Version) (int, error) {
	n, _, err := p.sizes(v)
	return n, err
}

// sizes returns the body's length and its property block's (without
// the block's length prefix; 0 below MQTT 5).
func (p *Publish) sizes(v Version) (body, props int, err error) {
	const t = TypePublish
	switch {
	case p.QoS > 2:
		return 0, 0, newError(ErrEncode, t, v, "QoS %d", p.QoS)
	case p.QoS > 0 && p.PacketID == 0:
		return 0, 0, newError(ErrEncode, t, v, "packet identifier 0 with QoS %d", p.QoS)
	case p.Dup && p.QoS == 0:
		return 0, 0, newError(ErrEncode, t, v, "DUP on a QoS 0 message")
	case len(p.Topic) > maxString:
		return 0, 0, stringErr(t, v, "topic name")
	case p.Topic == "" && (v < Version5 || !p.Properties.Present.Has(PropTopicAlias)):
		return 0, 0, newError(ErrEncode, t, v, "empty topic name without topic alias")
	case hasWildcard(p.Topic):
		return 0, 0, newError(ErrEncode, t, v, "wildcard in topic name %q", p.Topic)
	}
	n := 2 + len(p.Topic) + len(p.Payload)
	if p.QoS > 0 {
		n += 2
	}
	pt, pn, err := propsSize(&p.Properties, t, false, v)
	return n + pt, pn, err
}

func (p *Publish) appendBody(dst []byte, v Version) []byte {
	n := 0
	if v == Version5 {
		n = p.Properties.rawLen()
	}
	return p.appendBodyProps(dst, v, n)
}

// appendBodyProps is appendBody given the property block's length
// (sizes), not walking the properties again for it.
func (p *Publish) appendBodyProps(dst []byte, v Version, props int) []byte {
	dst = appendString(dst, p.Topic)
	if p.QoS > 0 {
		dst = appendUint16(dst, p.PacketID)
	}
	if v == Version5 {
		dst = p.Properties.appendProperties(dst, props)
	}
	return append(dst, p.Payload...)
}

// ackSize sizes PUBACK, PUBREC, PUBREL and PUBCOMP, choosing the shortest
// MQTT 5 form: 2 bytes for reason 0 without properties, 3 for a reason
// without properties.
func ackSize(t Type, v Version, id uint16, rc ReasonCode, props *Properties) (int, error) {
	if id == 0 {
		return 0, newError(ErrEncode, t, v, "packet identifier 0")
	}
	if v < Version5 {
		return 2, nil
	}
	if !ValidReasonCode(t, v, rc) {
		return 0, newError(ErrEncode, t, v, "reason code 0x%02X not allowed", byte(rc))
	}
	pt, n, err := propsSize(props, t, false, v)
	switch {
	case err != nil:
		return 0, err
	case n > 0:
		return 3 + pt, nil
	case rc != 0:
		return 3, nil
	}
	return 2, nil
}

func appendAck(dst []byte, v Version, id uint16, rc ReasonCode, props *Properties) []byte {
	dst = appendUint16(dst, id)
	if v < Version5 {
		return dst
	}
	n := props.rawLen()
	if n > 0 {
		return props.appendProperties(append(dst, byte(rc)), n)
	}
	if rc != 0 {
		dst = append(dst, byte(rc))
	}
	return dst
}

func (a *Puback) bodySize(v Version) (int, error) {
	return ackSize(TypePuback, v, a.PacketID, a.ReasonCode, &a.Properties)
}
func (a *Puback) appendBody(dst []byte, v Version) []byte {
	return appendAck(dst, v, a.PacketID, a.ReasonCode, &a.Properties)
}
func (a *Pubrec) bodySize(v Version) (int, error) {
	return ackSize(TypePubrec, v, a.PacketID, a.ReasonCode, &a.Properties)
}
func (a *Pubrec) appendBody(dst []byte, v Version) []byte {
	return appendAck(dst, v, a.PacketID, a.ReasonCode, &a.Properties)
}
func (a *Pubrel) bodySize(v Version) (int, error) {
	return ackSize(TypePubrel, v, a.PacketID, a.ReasonCode, &a.Properties)
}
func (a *Pubrel) appendBody(dst []byte, v Version) []byte {
	return appendAck(dst, v, a.PacketID, a.ReasonCode, &a.Properties)
}
func (a *Pubcomp) bodySize(v Version) (int, error) {
	return ackSize(TypePubcomp, v, a.PacketID, a.ReasonCode, &a.Properties)
}
func (a *Pubcomp) appendBody(dst []byte, v Version) []byte {
	return appendAck(dst, v, a.PacketID, a.ReasonCode, &a.Properties)
}

func (s *Subscribe) bodySize(v Version) (int, error) {
	const t = TypeSubscribe
	if s.PacketID == 0 {
		return 0, newError(ErrEncode, t, v, "packet identifier 0")
	}
	if len(s.Subscriptions) == 0 {
		return 0, newError(ErrEncode, t, v, "no subscriptions")
	}
	pt, _, err := propsSize(&s.Properties, t, false, v)
	if err != nil {
		return 0, err
	}
	n := 2 + pt
	for _, sub := range s.Subscriptions {
		switch {
		case len(sub.Filter) > maxString:
			return 0, stringErr(t, v, "topic filter")
		case !ValidTopicFilter(sub.Filter):
			return 0, newError(ErrEncode, t, v, "invalid topic filter %q", sub.Filter)
		case sub.QoS > 2 || sub.RetainHandling > 2:
			return 0, newError(ErrEncode, t, v, "QoS %d / retain handling %d", sub.QoS, sub.RetainHandling)
		case v == Version5 && sub.NoLocal && strings.HasPrefix(sub.Filter, sharePrefix):
			return 0, newError(ErrEncode, t, v, "no local on shared subscription")
		}
		n += 2 + len(sub.Filter) + 1
	}
	return n, nil
}

func (s *Subscribe) appendBody(dst []byte, v Version) []byte {
	dst = appendUint16(dst, s.PacketID)
	if v == Version5 {
		dst = s.Properties.appendProperties(dst, s.Properties.rawLen())
	}
	for _, sub := range s.Subscriptions {
		opts := sub.QoS
		if v == Version5 {
			opts |= sub.RetainHandling << 4
			if sub.NoLocal {
				opts |= 0x04
			}
			if sub.RetainAsPublished {
				opts |= 0x08
			}
		}
		dst = append(appendString(dst, sub.Filter), opts)
	}
	return dst
}

// wireCode returns the code sent for a SUBACK or UNSUBACK entry at v: below
// 5 every SUBACK failure is 0x80.
func wireCode(t Type, v Version, rc ReasonCode) ReasonCode {
	if v < Version5 && t == TypeSuback && rc >= 0x80 {
		return V3SubackFailure
	}
	return rc
}

func codesSize(t Type, v Version, id uint16, props *Properties, codes []ReasonCode) (int, error) {
	if id == 0 {
		return 0, newError(ErrEncode, t, v, "packet identifier 0")
	}
	if t == TypeUnsuback && v < Version5 {
		return 2, nil
	}
	if len(codes) == 0 {
		return 0, newError(ErrEncode, t, v, "no reason codes")
	}
	for _, rc := range codes {
		if !ValidReasonCode(t, v, wireCode(t, v, rc)) {
			return 0, newError(ErrEncode, t, v, "reason code 0x%02X not allowed", byte(rc))
		}
	}
	pt, _, err := propsSize(props, t, false, v)
	return 2 + pt + len(codes), err
}

func appendCodes(dst []byte, t Type, v Version, id uint16, props *Properties, codes []ReasonCode) []byte {
	dst = appendUint16(dst, id)
	if t == TypeUnsuback && v < Version5 {
		return dst
	}
	if v == Version5 {
		dst = props.appendProperties(dst, props.rawLen())
	}
	for _, rc := range codes {
		dst = append(dst, byte(wireCode(t, v, rc)))
	}
	return dst
}

func (s *Suback) bodySize(v Version) (int, error) {
	return codesSize(TypeSuback, v, s.PacketID, &s.Properties, s.ReasonCodes)
}
func (s *Suback) appendBody(dst []byte, v Version) []byte {
	return appendCodes(dst, TypeSuback, v, s.PacketID, &s.Properties, s.ReasonCodes)
}
func (s *Unsuback) bodySize(v Version) (int, error) {
	return codesSize(TypeUnsuback, v, s.PacketID, &s.Properties, s.ReasonCodes)
}
func (s *Unsuback) appendBody(dst []byte, v Version) []byte {
	return appendCodes(dst, TypeUnsuback, v, s.PacketID, &s.Properties, s.ReasonCodes)
}

func (u *Unsubscribe) bodySize(v Version) (int, error) {
	const t = TypeUnsubscribe
	if u.PacketID == 0 {
		return 0, newError(ErrEncode, t, v, "packet identifier 0")
	}
	if len(u.Filters) == 0 {
		return 0, newError(ErrEncode, t, v, "no topic filters")
	}
	pt, _, err := propsSize(&u.Properties, t, false, v)
	if err != nil {
		return 0, err
	}
	n := 2 + pt
	for _, f := range u.Filters {
		if len(f) > maxString {
			return 0, stringErr(t, v, "topic filter")
		}
		if !ValidTopicFilter(f) {
			return 0, newError(ErrEncode, t, v, "invalid topic filter %q", f)
		}
		n += 2 + len(f)
	}
	return n, nil
}

func (u *Unsubscribe) appendBody(dst []byte, v Version) []byte {
	dst = appendUint16(dst, u.PacketID)
	if v == Version5 {
		dst = u.Properties.appendProperties(dst, u.Properties.rawLen())
	}
	for _, f := range u.Filters {
		dst = appendString(dst, f)
	}
	return dst
}

func (*Pingreq) bodySize(Version) (int, error)            { return 0, nil }
func (*Pingreq) appendBody(dst []byte, _ Version) []byte  { return dst }
func (*Pingresp) bodySize(Version) (int, error)           { return 0, nil }
func (*Pingresp) appendBody(dst []byte, _ Version) []byte { return dst }

// reasonOnlySize sizes DISCONNECT and AUTH: empty for reason 0 without
// properties; a DISCONNECT with only a reason is 1 byte.
func reasonOnlySize(t Type, v Version, rc ReasonCode, props *Properties) (int, error) {
	if v < Version5 {
		if t == TypeAuth {
			return 0, newError(ErrEncode, t, v, "AUTH exists in MQTT 5 only")
		}
		return 0, nil
	}
	if !ValidReasonCode(t, v, rc) {
		return 0, newError(ErrEncode, t, v, "reason code 0x%02X not allowed", byte(rc))
	}
	pt, n, err := propsSize(props, t, false, v)
	switch {
	case err != nil:
		return 0, err
	case n > 0 || (rc != 0 && t == TypeAuth):
		return 1 + pt, nil
	case rc != 0:
		return 1, nil
	}
	return 0, nil
}

func appendReasonOnly(dst []byte, t Type, v Version, rc ReasonCode, props *Properties) []byte {
	if v < Version5 {
		return dst
	}
	n := props.rawLen()
	switch {
	case n > 0 || (rc != 0 && t == TypeAuth):
		return props.appendProperties(append(dst, byte(rc)), n)
	case rc != 0:
		return append(dst, byte(rc))
	}
	return dst
}

func (d *Disconnect) bodySize(v Version) (int, error) {
	return reasonOnlySize(TypeDisconnect, v, d.ReasonCode, &d.Properties)
}
func (d *Disconnect) appendBody(dst []byte, v Version) []byte {
	return appendReasonOnly(dst, TypeDisconnect, v, d.ReasonCode, &d.Properties)
}
func (a *Auth) bodySize(v Version) (int, error) {
	return reasonOnlySize(TypeAuth, v, a.ReasonCode, &a.Properties)
}
func (a *Auth) appendBody(dst []byte, v Version) []byte {
	return appendReasonOnly(dst, TypeAuth, v, a.ReasonCode, &a.Properties)
}
