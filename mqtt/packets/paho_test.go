package packets

import (
	"bytes"
	"reflect"
	"testing"

	paho "github.com/eclipse/paho.golang/packets"
)

// Cross-check against github.com/eclipse/paho.golang/packets (MQTT 5 only).
// Known paho divergences the generator steers around (gen.pahoSafe):
//   - one Subscription Identifier per packet (a *int);
//   - empty string and binary properties are treated as absent;
//   - it encodes will properties with the CONNECT set, dropping payload
//     format, message expiry, content type, response topic and correlation
//     data (gen.pahoWillSafe, paho-encodes direction only);
//   - it cannot decode a 0-byte DISCONNECT (reason 0, no properties), which
//     the specification allows and this encoder emits: that case is
//     checked separately below.

func ptr[T any](v T) *T { return &v }

func toPahoProps(p *Properties) *paho.Properties {
	pp := &paho.Properties{}
	m := p.Present
	if m.Has(PropPayloadFormat) {
		pp.PayloadFormat = ptr(p.PayloadFormat)
	}
	if m.Has(PropMessageExpiry) {
		pp.MessageExpiry = ptr(p.MessageExpiry)
	}
	pp.ContentType, pp.ResponseTopic, pp.CorrelationData = p.ContentType, p.ResponseTopic, p.CorrelationData
	if len(p.SubscriptionIdentifiers) > 0 {
		pp.SubscriptionIdentifier = ptr(int(p.SubscriptionIdentifiers[0]))
	}
	if m.Has(PropSessionExpiry) {
		pp.SessionExpiryInterval = ptr(p.SessionExpiry)
	}
	pp.AssignedClientID = p.AssignedClientID
	if m.Has(PropServerKeepAlive) {
		pp.ServerKeepAlive = ptr(p.ServerKeepAlive)
	}
	pp.AuthMethod, pp.AuthData = p.AuthMethod, p.AuthData
	if m.Has(PropRequestProblemInfo) {
		pp.RequestProblemInfo = ptr(p.RequestProblemInfo)
	}
	if m.Has(PropWillDelay) {
		pp.WillDelayInterval = ptr(p.WillDelay)
	}
	if m.Has(PropRequestResponseInfo) {
		pp.RequestResponseInfo = ptr(p.RequestResponseInfo)
	}
	pp.ResponseInfo, pp.ServerReference, pp.ReasonString = p.ResponseInfo, p.ServerReference, p.ReasonString
	if m.Has(PropReceiveMaximum) {
		pp.ReceiveMaximum = ptr(p.ReceiveMaximum)
	}
	if m.Has(PropTopicAliasMaximum) {
		pp.TopicAliasMaximum = ptr(p.TopicAliasMaximum)
	}
	if m.Has(PropTopicAlias) {
		pp.TopicAlias = ptr(p.TopicAlias)
	}
	if m.Has(PropMaximumQoS) {
		pp.MaximumQOS = ptr(p.MaximumQoS)
	}
	if m.Has(PropRetainAvailable) {
		pp.RetainAvailable = ptr(p.RetainAvailable)
	}
	for _, u := range p.User {
		pp.User = append(pp.User, paho.User{Key: u.Key, Value: u.Value})
	}
	if m.Has(PropMaximumPacketSize) {
		pp.MaximumPacketSize = ptr(p.MaximumPacketSize)
	}
	if m.Has(PropWildcardSubAvailable) {
		pp.WildcardSubAvailable = ptr(p.WildcardSubAvail)
	}
	if m.Has(PropSubIDAvailable) {
		pp.SubIDAvailable = ptr(p.SubIDAvailable)
	}
	if m.Has(PropSharedSubAvailable) {
		pp.SharedSubAvailable = ptr(p.SharedSubAvailable)
	}
	return pp
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func fromPahoProps(pp *paho.Properties) Properties {
	var p Properties
	if pp == nil {
		return p
	}
	setB := func(id PropID, v *byte) {
		if v != nil {
			p.Present.Add(id)
			*p.byteValue(id) = *v
		}
	}
	set16 := func(id PropID, v *uint16) {
		if v != nil {
			p.Present.Add(id)
			*p.u16Value(id) = *v
		}
	}
	set32 := func(id PropID, v *uint32) {
		if v != nil {
			p.Present.Add(id)
			*p.u32Value(id) = *v
		}
	}
	setS := func(id PropID, v string) {
		if v != "" {
			p.Present.Add(id)
			*p.stringValue(id) = v
		}
	}
	setBin := func(id PropID, v []byte) {
		if len(v) > 0 {
			p.Present.Add(id)
			*p.binaryValue(id) = v
		}
	}
	setB(PropPayloadFormat, pp.PayloadFormat)
	set32(PropMessageExpiry, pp.MessageExpiry)
	setS(PropContentType, pp.ContentType)
	setS(PropResponseTopic, pp.ResponseTopic)
	setBin(PropCorrelationData, pp.CorrelationData)
	if pp.SubscriptionIdentifier != nil {
		p.SubscriptionIdentifiers = []uint32{uint32(*pp.SubscriptionIdentifier)}
	}
	set32(PropSessionExpiry, pp.SessionExpiryInterval)
	setS(PropAssignedClientID, pp.AssignedClientID)
	set16(PropServerKeepAlive, pp.ServerKeepAlive)
	setS(PropAuthMethod, pp.AuthMethod)
	setBin(PropAuthData, pp.AuthData)
	setB(PropRequestProblemInfo, pp.RequestProblemInfo)
	set32(PropWillDelay, pp.WillDelayInterval)
	setB(PropRequestResponseInfo, pp.RequestResponseInfo)
	setS(PropResponseInfo, pp.ResponseInfo)
	setS(PropServerReference, pp.ServerReference)
	setS(PropReasonString, pp.ReasonString)
	set16(PropReceiveMaximum, pp.ReceiveMaximum)
	set16(PropTopicAliasMaximum, pp.TopicAliasMaximum)
	set16(PropTopicAlias, pp.TopicAlias)
	setB(PropMaximumQoS, pp.MaximumQOS)
	setB(PropRetainAvailable, pp.RetainAvailable)
	for _, u := range pp.User {
		p.User = append(p.User, UserProperty{Key: u.Key, Value: u.Value})
	}
	set32(PropMaximumPacketSize, pp.MaximumPacketSize)
	setB(PropWildcardSubAvailable, pp.WildcardSubAvailable)
	setB(PropSubIDAvailable, pp.SubIDAvailable)
	setB(PropSharedSubAvailable, pp.SharedSubAvailable)
	return p
}

func codesToBytes(cs []ReasonCode) []byte {
	b := make([]byte, len(cs))
	for i, c := range cs {
		b[i] = byte(c)
	}
	return b
}

func bytesToCodes(b []byte) []ReasonCode {
	cs := make([]ReasonCode, len(b))
	for i, c := range b {
		cs[i] = ReasonCode(c)
	}
	return cs
}

// toPaho converts one of our packets into paho's content struct.
func toPaho(p Packet) paho.Packet {
	switch p := p.(type) {
	case *Connect:
		return &paho.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, CleanStart: p.CleanStart,
			KeepAlive: p.KeepAlive, Properties: toPahoProps(&p.Properties), ClientID: p.ClientID,
			WillFlag: p.WillFlag, WillQOS: p.WillQoS, WillRetain: p.WillRetain,
			WillProperties: toPahoProps(&p.WillProperties), WillTopic: p.WillTopic, WillMessage: p.WillPayload,
			UsernameFlag: p.UsernameFlag, Username: p.Username, PasswordFlag: p.PasswordFlag, Password: p.Password}
	case *Connack:
		return &paho.Connack{SessionPresent: p.SessionPresent, ReasonCode: byte(p.ReasonCode),
			Properties: toPahoProps(&p.Properties)}
	case *Publish:
		return &paho.Publish{Duplicate: p.Dup, QoS: p.QoS, Retain: p.Retain, Topic: p.Topic,
			PacketID: p.PacketID, Properties: toPahoProps(&p.Properties), Payload: p.Payload}
	case *Puback:
		return &paho.Puback{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Pubrec:
		return &paho.Pubrec{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Pubrel:
		return &paho.Pubrel{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Pubcomp:
		return &paho.Pubcomp{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Subscribe:
		s := &paho.Subscribe{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties)}
		for _, sub := range p.Subscriptions {
			s.Subscriptions = append(s.Subscriptions, paho.SubOptions{Topic: sub.Filter, QoS: sub.QoS,
				RetainHandling: sub.RetainHandling, NoLocal: sub.NoLocal, RetainAsPublished: sub.RetainAsPublished})
		}
		return s
	case *Suback:
		return &paho.Suback{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties), Reasons: codesToBytes(p.ReasonCodes)}
	case *Unsubscribe:
		return &paho.Unsubscribe{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties), Topics: p.Filters}
	case *Unsuback:
		return &paho.Unsuback{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties), Reasons: codesToBytes(p.ReasonCodes)}
	case *Pingreq:
		return &paho.Pingreq{}
	case *Pingresp:
		return &paho.Pingresp{}
	case *Disconnect:
		return &paho.Disconnect{ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Auth:
		return &paho.Auth{ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	}
	panic("toPaho")
}

// fromPaho converts paho's decoded content into our packet.
func fromPaho(cp paho.Packet) Packet {
	switch p := cp.(type) {
	case *paho.Connect:
		c := &Connect{Version: Version(p.ProtocolVersion), CleanStart: p.CleanStart, KeepAlive: p.KeepAlive,
			Properties: fromPahoProps(p.Properties), ClientID: p.ClientID, WillFlag: p.WillFlag,
			WillQoS: p.WillQOS, WillRetain: p.WillRetain, WillTopic: p.WillTopic,
			WillPayload: nilIfEmpty(p.WillMessage), UsernameFlag: p.UsernameFlag, Username: p.Username,
			PasswordFlag: p.PasswordFlag, Password: nilIfEmpty(p.Password)}
		if p.WillFlag {
			c.WillProperties = fromPahoProps(p.WillProperties)
		}
		return c
	case *paho.Connack:
		return &Connack{SessionPresent: p.SessionPresent, ReasonCode: ReasonCode(p.ReasonCode),
			Properties: fromPahoProps(p.Properties)}
	case *paho.Publish:
		return &Publish{Dup: p.Duplicate, QoS: p.QoS, Retain: p.Retain, Topic: p.Topic, PacketID: p.PacketID,
			Properties: fromPahoProps(p.Properties), Payload: nilIfEmpty(p.Payload)}
	case *paho.Puback:
		return &Puback{PacketID: p.PacketID, ReasonCode: ReasonCode(p.ReasonCode), Properties: fromPahoProps(p.Properties)}
	case *paho.Pubrec:
		return &Pubrec{PacketID: p.PacketID, ReasonCode: ReasonCode(p.ReasonCode), Properties: fromPahoProps(p.Properties)}
	case *paho.Pubrel:
		return &Pubrel{PacketID: p.PacketID, ReasonCode: ReasonCode(p.ReasonCode), Properties: fromPahoProps(p.Properties)}
	case *paho.Pubcomp:
		return &Pubcomp{PacketID: p.PacketID, ReasonCode: ReasonCode(p.ReasonCode), Properties: fromPahoProps(p.Properties)}
	case *paho.Subscribe:
		s := &Subscribe{PacketID: p.PacketID, Properties: fromPahoProps(p.Properties)}
		for _, o := range p.Subscriptions {
			s.Subscriptions = append(s.Subscriptions, Subscription{Filter: o.Topic, QoS: o.QoS,
				NoLocal: o.NoLocal, RetainAsPublished: o.RetainAsPublished, RetainHandling: o.RetainHandling})
		}
		return s
	case *paho.Suback:
		return &Suback{PacketID: p.PacketID, Properties: fromPahoProps(p.Properties), ReasonCodes: bytesToCodes(p.Reasons)}
	case *paho.Unsubscribe:
		return &Unsubscribe{PacketID: p.PacketID, Properties: fromPahoProps(p.Properties), Filters: p.Topics}
	case *paho.Unsuback:
		return &Unsuback{PacketID: p.PacketID, Properties: fromPahoProps(p.Properties), ReasonCodes: bytesToCodes(p.Reasons)}
	case *paho.Pingreq:
		return &Pingreq{}
	case *paho.Pingresp:
		return &Pingresp{}
	case *paho.Disconnect:
		return &Disconnect{ReasonCode: ReasonCode(p.ReasonCode), Properties: fromPahoProps(p.Properties)}
	case *paho.Auth:
		return &Auth{ReasonCode: ReasonCode(p.ReasonCode), Properties: fromPahoProps(p.Properties)}
	}
	panic("fromPaho")
}

// TestMQTTPacketsPahoDecodesOurs encodes random v5 packets with this codec
// and decodes them with paho.golang.
func TestMQTTPacketsPahoDecodesOurs(t *testing.T) {
	g := newGen(10)
	g.pahoSafe = true
	checked := map[Type]int{}
	for i := 0; i < 5000; i++ {
		p := g.anyPacket(Version5)
		if d, ok := p.(*Disconnect); ok && d.ReasonCode == 0 && d.Properties.mask() == 0 {
			continue // paho cannot read the 0-byte form; see TestMQTTPacketsPahoEmptyDisconnect
		}
		b, err := AppendPacket(nil, p, Version5)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := paho.ReadPacket(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("paho cannot read our %T % X: %v", p, b, err)
		}
		if got := fromPaho(cp.Content); !reflect.DeepEqual(got, p) {
			t.Fatalf("paho reads our bytes differently:\n ours %+v\n paho %+v\nbytes % X", p, got, b)
		}
		checked[p.Type()]++
	}
	if len(checked) != 15 {
		t.Fatalf("only %d packet types checked: %v", len(checked), checked)
	}
}

// TestMQTTPacketsOursDecodesPaho encodes random v5 packets with paho.golang
// and decodes them with this codec.
func TestMQTTPacketsOursDecodesPaho(t *testing.T) {
	g := newGen(11)
	g.pahoSafe, g.pahoWillSafe = true, true
	for i := 0; i < 5000; i++ {
		p := g.anyPacket(Version5)
		var buf bytes.Buffer
		if _, err := toPaho(p).WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := Decode(Version5, buf.Bytes())
		if err != nil {
			t.Fatalf("cannot read paho's %T % X: %v\n%+v", p, buf.Bytes(), err, p)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("we read paho's bytes differently:\n want %+v\n  got %+v\nbytes % X", p, got, buf.Bytes())
		}
	}
}

// TestMQTTPacketsPahoEmptyDisconnect records the one divergence: the
// specification allows a DISCONNECT with remaining length 0 (reason 0, no
// properties) and we emit it; paho.golang v0.23.0 fails to read it while we
// read paho's longer form.
func TestMQTTPacketsPahoEmptyDisconnect(t *testing.T) {
	b, err := AppendPacket(nil, &Disconnect{}, Version5)
	if err != nil || !bytes.Equal(b, []byte{0xE0, 0x00}) {
		t.Fatalf("% X %v", b, err)
	}
	var buf bytes.Buffer
	if _, err := (&paho.Disconnect{Properties: &paho.Properties{}}).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if p, err := Decode(Version5, buf.Bytes()); err != nil || !reflect.DeepEqual(p, &Disconnect{}) {
		t.Fatalf("paho's DISCONNECT % X: %+v %v", buf.Bytes(), p, err)
	}
	if _, err := paho.ReadPacket(bytes.NewReader(b)); err == nil {
		t.Log("paho.golang now reads the 0-byte DISCONNECT; the generator exclusion can go")
	}
}

// TestMQTTPacketsStricterThanPaho shows inputs paho.golang accepts that the
// specification forbids and this codec rejects (the weaknesses listed in
// mqtt-notes.md).
func TestMQTTPacketsStricterThanPaho(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"duplicate property", "30 ?? 00 01 'a' 0A 02 00 00 00 01 02 00 00 00 02"},
		{"QoS 3", "36 ?? 00 01 'a' 00 01 00"},
		{"invalid UTF-8 topic", "30 ?? 00 02 C3 28 00"},
		{"U+0000 in topic", "30 ?? 00 01 00 00"},
		{"reserved subscribe option bits", "82 ?? 00 01 00 00 01 'a' C0"},
	} {
		b := hx(tc.hex)
		if _, err := paho.ReadPacket(bytes.NewReader(b)); err != nil {
			t.Errorf("%s: paho now rejects it too (%v)", tc.name, err)
		}
		if _, err := Decode(Version5, b); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
