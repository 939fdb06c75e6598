package packets

import (
	"bytes"
	"strings"
)

// DecodeFixedHeader parses the fixed header at the front of b: the packet
// type, its flags nibble, the remaining length (body size) and the header's
// own length (2 to 5 bytes). It returns ErrIncomplete while b is too short
// to tell, and rejects as early as the bytes allow: a reserved type or
// invalid flags on the first byte, a remaining length over 4 bytes or not
// minimally encoded, and a packet larger than MaxPacketSize (checked from the
// header alone, even from a partial length, so nothing is ever allocated for
// an oversized packet). AUTH (type 15) is accepted here; Decode rejects it
// below version 5.
func (d *Decoder) DecodeFixedHeader(b []byte) (typ, flags, remainingLength, headerLen int, err error) {
	if len(b) == 0 {
		return 0, 0, 0, 0, ErrIncomplete
	}
	t, f := Type(b[0]>>4), b[0]&0x0F
	if t == 0 {
		return 0, 0, 0, 0, newError(ErrMalformed, 0, 0, "reserved packet type 0")
	}
	if t == TypePublish {
		if f&0x06 == 0x06 {
			return 0, 0, 0, 0, newError(ErrMalformed, t, 0, "QoS 3")
		}
	} else if f != requiredFlags[t] {
		return 0, 0, 0, 0, newError(ErrMalformed, t, 0, "invalid fixed header flags 0x%X%s", f, otherProtocol(b))
	}
	rl, n, res := parseVarInt(b[1:])
	switch res {
	case varIntShort:
		// Every length byte so far has its continuation bit set, so the
		// final value is at least what they hold plus one in the next
		// 7-bit group (a minimal encoding never ends in a zero byte).
		if k := len(b) - 1; k > 0 {
			least := 0
			for i := k - 1; i >= 0; i-- {
				least = least<<7 | int(b[1+i]&0x7F)
			}
			least += 1 << (7 * k)
			if 1+k+1+least > d.max() {
				return 0, 0, 0, 0, newError(ErrPacketTooLarge, t, 0,
					"packet of at least %d bytes exceeds the maximum %d", 2+k+least, d.max())
			}
		}
		return 0, 0, 0, 0, ErrIncomplete
	case varIntTooLong:
		return 0, 0, 0, 0, newError(ErrMalformed, t, 0, "remaining length longer than 4 bytes")
	case varIntNotMinimal:
		return 0, 0, 0, 0, newError(ErrMalformed, t, 0, "remaining length not minimally encoded")
	}
	if 1+n+rl > d.max() {
		return 0, 0, 0, 0, newError(ErrPacketTooLarge, t, 0, "packet of %d bytes exceeds the maximum %d", 1+n+rl, d.max())
	}
	return int(t), int(f), rl, 1 + n, nil
}

// otherProtocol names, for a log line, the protocol a stream's first bytes
// b belong to when a client speaks something else than MQTT at an MQTT
// port: TLS (a client with TLS on, at the plain port) or HTTP. "" when b
// looks like neither.
func otherProtocol(b []byte) string {
	if len(b) >= 2 && b[0] == 0x16 && b[1] == 0x03 {
		return " (a TLS handshake: a TLS client at a plain MQTT port?)"
	}
	if i := bytes.IndexByte(b[:min(len(b), 8)], ' '); i > 0 {
		switch string(b[:i]) {
		case "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "CONNECT", "TRACE", "PATCH":
			return " (an HTTP request, not MQTT)"
		}
	}
	return ""
}

// Next decodes the packet at the front of b and returns it with the number
// of bytes it took; more bytes may follow. It returns ErrIncomplete if b does
// not yet hold the whole packet. This is the call for an event loop reading
// into a growable buffer:
//
//	for {
//		p, n, err := d.Next(version, buf)
//		if err == packets.ErrIncomplete { break } // read more
//		if err != nil { ... disconnect with packets.ReasonCodeOf(err) }
//		buf = buf[n:]
//		handle(p)
//	}
//
// v is the version the connection negotiated; before CONNECT pass 0: only
// CONNECT is accepted then. CONNECT is decoded at the level it names, which
// the returned *Connect carries in Version.
func (d *Decoder) Next(v Version, b []byte) (Packet, int, error) {
	return d.next(v, b, nil, d.alias)
}

// Scratch is room for the packets a connection receives most: PUBLISH
// and the four acknowledgements. NextScratch decodes them into it instead
// of allocating a packet each time. The zero Scratch is ready to use; one
// Scratch serves one connection (one decoding goroutine at a time).
type Scratch struct {
	publish Publish
	puback  Puback
	pubrec  Pubrec
	pubrel  Pubrel
	pubcomp Pubcomp
	// user is the array of an aliased PUBLISH's user property list
	// (NextScratchAlias), reused from one packet to the next.
	user []UserProperty
}

// maxScratchUsers bounds the user property array a Scratch keeps.
const maxScratchUsers = 64

// NextScratch is Next decoding a PUBLISH, PUBACK, PUBREC, PUBREL or
// PUBCOMP into s: such a packet is valid only until the next call with s
// (what it holds, strings, byte slices and property lists, is its own as
// with Next, and stays valid). Other packets are allocated as by Next.
func (d *Decoder) NextScratch(v Version, b []byte, s *Scratch) (Packet, int, error) {
	return d.next(v, b, s, d.alias)
}

// NextScratchAlias is NextScratch without the copies, whatever the
// decoder's Options.Alias: the packet's strings and byte slices point into
// b, and a PUBLISH's user property list into s. It is valid only while b's
// bytes stay as they are and until the next call with s; a caller that
// keeps any of it copies it (Detach copies the strings and byte slices,
// not the user property list's array).
func (d *Decoder) NextScratchAlias(v Version, b []byte, s *Scratch) (Packet, int, error) {
	return d.next(v, b, s, true)
}

func (d *Decoder) next(v Version, b []byte, s *Scratch, alias bool) (Packet, int, error) {
	typ, flags, rl, hl, err := d.DecodeFixedHeader(b)
	if err != nil {
		return nil, 0, err
	}
	total := hl + rl
	if len(b) < total {
		return nil, 0, ErrIncomplete
	}
	var users *[]UserProperty
	if alias && s != nil {
		users = &s.user
	}
	p, err := decodeBody(Type(typ), byte(flags), v, b[hl:total:total], s, users)
	if err != nil {
		return nil, 0, err
	}
	if users != nil && cap(s.user) > maxScratchUsers {
		s.user = nil // the packet keeps it; the next one starts afresh
	}
	if !alias {
		Detach(p)
	}
	return p, total, nil
}

// Decode decodes b, which must hold exactly one whole packet (fixed header
// included): bytes after the packet are an error (ErrMalformed), too few
// bytes give ErrIncomplete. See Next for v.
func (d *Decoder) Decode(v Version, b []byte) (Packet, error) {
	p, n, err := d.Next(v, b)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, newError(ErrMalformed, p.Type(), v, "%d bytes after the packet", len(b)-n)
	}
	return p, nil
}

// decodeBody decodes a packet's body. users, when not nil, is the array
// a PUBLISH's user property list goes into (NextScratchAlias).
func decodeBody(t Type, flags byte, v Version, body []byte, s *Scratch, users *[]UserProperty) (Packet, error) {
	if t == TypeConnect {
		return decodeConnect(body)
	}
	if !v.Valid() {
		return nil, newError(ErrProtocol, t, v, "packet before CONNECT (no protocol version)")
	}
	r := reader{b: body}
	var (
		p   Packet
		err error
	)
	switch t {
	case TypeConnack:
		p, err = decodeConnack(&r, v)
	case TypePublish:
		var pub *Publish
		if s != nil {
			pub = &s.publish
		} else {
			pub = new(Publish)
		}
		r.users = users
		p, err = pub, decodePublish(&r, flags, v, pub)
	case TypePuback:
		a := reuse(s, func(s *Scratch) *Puback { return &s.puback })
		p, err = a, decodeAck(&r, t, v, &a.PacketID, &a.ReasonCode, &a.Properties)
	case TypePubrec:
		a := reuse(s, func(s *Scratch) *Pubrec { return &s.pubrec })
		p, err = a, decodeAck(&r, t, v, &a.PacketID, &a.ReasonCode, &a.Properties)
	case TypePubrel:
		a := reuse(s, func(s *Scratch) *Pubrel { return &s.pubrel })
		p, err = a, decodeAck(&r, t, v, &a.PacketID, &a.ReasonCode, &a.Properties)
	case TypePubcomp:
		a := reuse(s, func(s *Scratch) *Pubcomp { return &s.pubcomp })
		p, err = a, decodeAck(&r, t, v, &a.PacketID, &a.ReasonCode, &a.Properties)
	case TypeSubscribe:
		p, err = decodeSubscribe(&r, v)
	case TypeSuback:
		s := &Suback{}
		p, err = s, decodeCodes(&r, t, v, &s.PacketID, &s.Properties, &s.ReasonCodes)
	case TypeUnsubscribe:
		p, err = decodeUnsubscribe(&r, v)
	case TypeUnsuback:
		s := &Unsuback{}
		p, err = s, decodeCodes(&r, t, v, &s.PacketID, &s.Properties, &s.ReasonCodes)
	case TypePingreq:
		p = &Pingreq{}
	case TypePingresp:
		p = &Pingresp{}
	case TypeDisconnect:
		dc := &Disconnect{}
		p, err = dc, decodeReasonOnly(&r, t, v, &dc.ReasonCode, &dc.Properties)
	case TypeAuth:
		if v < Version5 {
			return nil, newError(ErrMalformed, t, v, "reserved packet type 15 before MQTT 5")
		}
		a := &Auth{}
		p, err = a, decodeReasonOnly(&r, t, v, &a.ReasonCode, &a.Properties)
	}
	if err != nil {
		return nil, err
	}
	if r.remaining() != 0 {
		return nil, newError(ErrMalformed, t, v, "%d trailing bytes", r.remaining())
	}
	return p, nil
}

func short(t Type, v Version, what string) error {
	return newError(ErrMalformed, t, v, "packet ends inside %s", what)
}

// field reads a string field, reporting a short packet or bad UTF-8.
func (r *reader) field(t Type, v Version, what string) (string, error) {
	s, ok, valid := r.str()
	if !ok {
		return "", short(t, v, what)
	}
	if !valid {
		return "", newError(ErrMalformed, t, v, "%s is not valid UTF-8 or contains U+0000", what)
	}
	return s, nil
}

func (r *reader) packetID(t Type, v Version) (uint16, error) {
	id, ok := r.u16()
	if !ok {
		return 0, short(t, v, "packet identifier")
	}
	if id == 0 {
		return 0, newError(ErrProtocol, t, v, "packet identifier 0")
	}
	return id, nil
}

// Protocol names (frozen by the specifications).
const (
	protocolMQTT   = "MQTT"
	protocolMQIsdp = "MQIsdp"
)

func decodeConnect(body []byte) (Packet, error) {
	const t = TypeConnect
	r := reader{b: body}
	name, ok, _ := r.str()
	if !ok {
		return nil, short(t, 0, "protocol name")
	}
	level, ok := r.u8()
	if !ok {
		return nil, short(t, 0, "protocol level")
	}
	v := Version(level)
	if !(name == protocolMQTT && (v == Version311 || v == Version5) || name == protocolMQIsdp && v == Version31) {
		return nil, newError(ErrUnsupportedProtocol, t, v, "protocol %q level %d", name, level)
	}
	flags, ok1 := r.u8()
	keepAlive, ok2 := r.u16()
	if !ok1 || !ok2 {
		return nil, short(t, v, "connect flags and keep alive")
	}
	c := &Connect{
		Version:      v,
		KeepAlive:    keepAlive,
		CleanStart:   flags&0x02 != 0,
		WillFlag:     flags&0x04 != 0,
		WillQoS:      flags >> 3 & 0x03,
		WillRetain:   flags&0x20 != 0,
		PasswordFlag: flags&0x40 != 0,
		UsernameFlag: flags&0x80 != 0,
	}
	switch {
	case flags&0x01 != 0:
		return nil, newError(ErrMalformed, t, v, "reserved connect flag set")
	case c.WillQoS == 3:
		return nil, newError(ErrMalformed, t, v, "will QoS 3")
	case !c.WillFlag && (c.WillQoS != 0 || c.WillRetain):
		return nil, newError(ErrMalformed, t, v, "will QoS or retain set without will flag")
	case v < Version5 && c.PasswordFlag && !c.UsernameFlag:
		return nil, newError(ErrProtocol, t, v, "password without user name")
	}
	var err error
	if v == Version5 {
		if err = decodeProperties(&r, &c.Properties, t, false, v); err != nil {
			return nil, err
		}
	}
	if c.ClientID, err = r.field(t, v, "client identifier"); err != nil {
		return nil, err
	}
	if c.WillFlag {
		if v == Version5 {
			if err = decodeProperties(&r, &c.WillProperties, t, true, v); err != nil {
				return nil, err
			}
		}
		if c.WillTopic, err = r.field(t, v, "will topic"); err != nil {
			return nil, err
		}
		if !ValidTopicName(c.WillTopic) {
			return nil, newError(ErrTopicNameInvalid, t, v, "will topic %q", c.WillTopic)
		}
		if c.WillPayload, ok = r.binary(); !ok {
			return nil, short(t, v, "will payload")
		}
	}
	if c.UsernameFlag {
		if c.Username, err = r.field(t, v, "user name"); err != nil {
			return nil, err
		}
	}
	if c.PasswordFlag {
		if c.Password, ok = r.binary(); !ok {
			return nil, short(t, v, "password")
		}
	}
	if r.remaining() != 0 {
		return nil, newError(ErrMalformed, t, v, "%d trailing bytes", r.remaining())
	}
	return c, nil
}

func decodeConnack(r *reader, v Version) (Packet, error) {
	const t = TypeConnack
	flags, ok1 := r.u8()
	rc, ok2 := r.u8()
	if !ok1 || !ok2 {
		return nil, short(t, v, "acknowledge flags and reason code")
	}
	c := &Connack{SessionPresent: flags&0x01 != 0, ReasonCode: ReasonCode(rc)}
	if flags&0xFE != 0 {
		return nil, newError(ErrMalformed, t, v, "reserved acknowledge flags 0x%02X", flags)
	}
	if !ValidReasonCode(t, v, c.ReasonCode) {
		return nil, newError(ErrProtocol, t, v, "invalid reason code 0x%02X", rc)
	}
	if c.SessionPresent && c.ReasonCode != 0 {
		return nil, newError(ErrProtocol, t, v, "session present with a refusal")
	}
	if v == Version5 {
		if err := decodeProperties(r, &c.Properties, t, false, v); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// reuse returns the packet of s that pick names, zeroed, or a new one
// without a Scratch.
func reuse[P any](s *Scratch, pick func(*Scratch) *P) *P {
	if s == nil {
		return new(P)
	}
	p := pick(s)
	var zero P
	*p = zero
	return p
}

func decodePublish(r *reader, flags byte, v Version, p *Publish) error {
	const t = TypePublish
	*p = Publish{Dup: flags&0x08 != 0, QoS: flags >> 1 & 0x03, Retain: flags&0x01 != 0}
	if p.Dup && p.QoS == 0 {
		return newError(ErrMalformed, t, v, "DUP set on a QoS 0 message")
	}
	var err error
	b, ok := r.binary()
	if !ok {
		return short(t, v, "topic name")
	}
	// plain: a valid topic name, checked in one pass (nearly every topic);
	// otherwise the full UTF-8 check here and the wildcard check below.
	plain := plainTopic(b)
	if !plain && !validUTF8(b) {
		return newError(ErrMalformed, t, v, "topic name is not valid UTF-8 or contains U+0000")
	}
	p.Topic = aliasString(b)
	if p.QoS > 0 {
		if p.PacketID, err = r.packetID(t, v); err != nil {
			return err
		}
	}
	if v == Version5 {
		if err = decodeProperties(r, &p.Properties, t, false, v); err != nil {
			return err
		}
	}
	switch {
	case plain:
	case p.Topic == "":
		if v < Version5 {
			return newError(ErrTopicNameInvalid, t, v, "empty topic name")
		}
		if !p.Properties.Present.Has(PropTopicAlias) {
			return newError(ErrProtocol, t, v, "empty topic name without topic alias")
		}
	case hasWildcard(p.Topic):
		return newError(ErrTopicNameInvalid, t, v, "wildcard in topic name %q", p.Topic)
	}
	p.Payload = r.rest()
	return nil
}

// decodeAck decodes PUBACK, PUBREC, PUBREL and PUBCOMP. In MQTT 5 a
// remaining length of 2 means reason 0 without properties and 3 means a
// reason code without properties.
func decodeAck(r *reader, t Type, v Version, id *uint16, rc *ReasonCode, props *Properties) error {
	var err error
	if *id, err = r.packetID(t, v); err != nil {
		return err
	}
	if v < Version5 || r.remaining() == 0 {
		return nil
	}
	c, _ := r.u8()
	*rc = ReasonCode(c)
	if !ValidReasonCode(t, v, *rc) {
		return newError(ErrProtocol, t, v, "invalid reason code 0x%02X", c)
	}
	if r.remaining() == 0 {
		return nil
	}
	return decodeProperties(r, props, t, false, v)
}

// decodeReasonOnly decodes DISCONNECT and AUTH: empty means reason 0 (and
// no body at all below MQTT 5), one byte means a reason without properties.
func decodeReasonOnly(r *reader, t Type, v Version, rc *ReasonCode, props *Properties) error {
	if v < Version5 || r.remaining() == 0 {
		return nil // below 5 a non-empty body is left for the trailing check
	}
	c, _ := r.u8()
	*rc = ReasonCode(c)
	if !ValidReasonCode(t, v, *rc) {
		return newError(ErrProtocol, t, v, "invalid reason code 0x%02X", c)
	}
	if r.remaining() == 0 {
		return nil
	}
	return decodeProperties(r, props, t, false, v)
}

// decodeCodes decodes SUBACK and UNSUBACK: packet id, properties (5), then
// one reason code per filter (none for a 3.1.1 UNSUBACK).
func decodeCodes(r *reader, t Type, v Version, id *uint16, props *Properties, codes *[]ReasonCode) error {
	var err error
	if *id, err = r.packetID(t, v); err != nil {
		return err
	}
	if t == TypeUnsuback && v < Version5 {
		return nil
	}
	if v == Version5 {
		if err = decodeProperties(r, props, t, false, v); err != nil {
			return err
		}
	}
	rest := r.rest()
	if len(rest) == 0 {
		return newError(ErrProtocol, t, v, "no reason codes")
	}
	cs := make([]ReasonCode, len(rest))
	for i, c := range rest {
		if !ValidReasonCode(t, v, ReasonCode(c)) {
			return newError(ErrProtocol, t, v, "invalid reason code 0x%02X", c)
		}
		cs[i] = ReasonCode(c)
	}
	*codes = cs
	return nil
}

func decodeSubscribe(r *reader, v Version) (Packet, error) {
	const t = TypeSubscribe
	s := &Subscribe{}
	var err error
	if s.PacketID, err = r.packetID(t, v); err != nil {
		return nil, err
	}
	if v == Version5 {
		if err = decodeProperties(r, &s.Properties, t, false, v); err != nil {
			return nil, err
		}
	}
	if r.remaining() == 0 {
		return nil, newError(ErrProtocol, t, v, "no topic filters")
	}
	var buf [8]Subscription
	subs := buf[:0]
	for r.remaining() > 0 {
		var sub Subscription
		if sub.Filter, err = r.field(t, v, "topic filter"); err != nil {
			return nil, err
		}
		opts, ok := r.u8()
		if !ok {
			return nil, short(t, v, "subscription options")
		}
		sub.QoS = opts & 0x03
		reserved := byte(0xFC)
		if v == Version5 {
			reserved = 0xC0
			sub.NoLocal = opts&0x04 != 0
			sub.RetainAsPublished = opts&0x08 != 0
			sub.RetainHandling = opts >> 4 & 0x03
		}
		switch {
		case opts&reserved != 0:
			return nil, newError(ErrMalformed, t, v, "reserved subscription option bits 0x%02X", opts)
		case sub.QoS == 3:
			return nil, newError(ErrMalformed, t, v, "QoS 3 in subscription options")
		case sub.RetainHandling == 3:
			return nil, newError(ErrProtocol, t, v, "retain handling 3")
		case !ValidTopicFilter(sub.Filter):
			return nil, newError(ErrTopicFilterInvalid, t, v, "topic filter %q", sub.Filter)
		case sub.NoLocal && strings.HasPrefix(sub.Filter, sharePrefix):
			return nil, newError(ErrProtocol, t, v, "no local on shared subscription %q", sub.Filter)
		}
		subs = append(subs, sub)
	}
	s.Subscriptions = make([]Subscription, len(subs))
	copy(s.Subscriptions, subs)
	return s, nil
}

func decodeUnsubscribe(r *reader, v Version) (Packet, error) {
	const t = TypeUnsubscribe
	u := &Unsubscribe{}
	var err error
	if u.PacketID, err = r.packetID(t, v); err != nil {
		return nil, err
	}
	if v == Version5 {
		if err = decodeProperties(r, &u.Properties, t, false, v); err != nil {
			return nil, err
		}
	}
	if r.remaining() == 0 {
		return nil, newError(ErrProtocol, t, v, "no topic filters")
	}
	var buf [8]string
	filters := buf[:0]
	for r.remaining() > 0 {
		f, err := r.field(t, v, "topic filter")
		if err != nil {
			return nil, err
		}
		if !ValidTopicFilter(f) {
			return nil, newError(ErrTopicFilterInvalid, t, v, "topic filter %q", f)
		}
		filters = append(filters, f)
	}
	u.Filters = make([]string, len(filters))
	copy(u.Filters, filters)
	return u, nil
}
