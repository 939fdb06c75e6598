package packets

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// hx turns "32 09 00 03 'a/b'" style notation into bytes: hex pairs, and
// quoted ASCII runs. "??" as the second token stands for the one-byte
// remaining length, computed.
func hx(s string) []byte {
	if f := strings.Fields(s); len(f) > 1 && f[1] == "??" {
		b := hx(strings.Replace(s, "??", "00", 1))
		b[1] = byte(len(b) - 2)
		return b
	}
	var out []byte
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \n\t|")
		if s == "" {
			break
		}
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			out = append(out, s[1:1+end]...)
			s = s[end+2:]
			continue
		}
		b, err := hex.DecodeString(s[:2])
		if err != nil {
			panic("hx: " + s)
		}
		out = append(out, b...)
		s = s[2:]
	}
	return out
}

type vector struct {
	name string
	v    Version
	hex  string
	p    Packet
}

func props(f func(p *Properties)) Properties {
	var p Properties
	f(&p)
	return p
}

var vectors = []vector{
	// MQTT 3.1 / 3.1.1
	{"v31 connect", Version31, "10 10 00 06 'MQIsdp' 03 02 00 0A 00 02 'c1'",
		&Connect{Version: Version31, CleanStart: true, KeepAlive: 10, ClientID: "c1"}},
	{"v311 connect full", Version311, "10 1C 00 04 'MQTT' 04 EE 00 3C 00 02 'c1' 00 01 'w' 00 03 'bye' 00 01 'u' 00 01 'p'",
		&Connect{Version: Version311, CleanStart: true, KeepAlive: 60, ClientID: "c1", WillFlag: true, WillQoS: 1,
			WillRetain: true, WillTopic: "w", WillPayload: []byte("bye"), UsernameFlag: true, Username: "u",
			PasswordFlag: true, Password: []byte("p")}},
	{"v311 connect empty client id", Version311, "10 0C 00 04 'MQTT' 04 00 00 00 00 00",
		&Connect{Version: Version311}},
	{"v311 connack session present", Version311, "20 02 01 00", &Connack{SessionPresent: true}},
	{"v311 connack refused", Version311, "20 02 00 05", &Connack{ReasonCode: ConnectRefusedNotAuthorized}},
	{"v311 publish qos1", Version311, "32 09 00 03 'a/b' 00 0A 'hi'",
		&Publish{QoS: 1, Topic: "a/b", PacketID: 10, Payload: []byte("hi")}},
	{"v311 publish qos0 retain empty", Version311, "31 05 00 03 'a/b'",
		&Publish{Retain: true, Topic: "a/b"}},
	{"v311 publish qos2 dup", Version311, "3C 06 00 01 'x' FF FF 'z'",
		&Publish{Dup: true, QoS: 2, Topic: "x", PacketID: 0xFFFF, Payload: []byte("z")}},
	{"v311 puback", Version311, "40 02 00 0A", &Puback{PacketID: 10}},
	{"v311 pubrec", Version311, "50 02 00 0A", &Pubrec{PacketID: 10}},
	{"v311 pubrel", Version311, "62 02 00 0A", &Pubrel{PacketID: 10}},
	{"v311 pubcomp", Version311, "70 02 00 0A", &Pubcomp{PacketID: 10}},
	{"v311 subscribe", Version311, "82 0C 00 0B 00 03 'a/#' 01 00 01 '+' 02",
		&Subscribe{PacketID: 11, Subscriptions: []Subscription{{Filter: "a/#", QoS: 1}, {Filter: "+", QoS: 2}}}},
	{"v311 suback", Version311, "90 04 00 0B 01 80",
		&Suback{PacketID: 11, ReasonCodes: []ReasonCode{1, V3SubackFailure}}},
	{"v311 unsubscribe", Version311, "A2 07 00 0C 00 03 'a/b'", &Unsubscribe{PacketID: 12, Filters: []string{"a/b"}}},
	{"v311 unsuback", Version311, "B0 02 00 0C", &Unsuback{PacketID: 12}},
	{"v311 pingreq", Version311, "C0 00", &Pingreq{}},
	{"v311 pingresp", Version311, "D0 00", &Pingresp{}},
	{"v311 disconnect", Version311, "E0 00", &Disconnect{}},

	// MQTT 5
	{"v5 connect", Version5, "10 33 00 04 'MQTT' 05 C6 00 1E" +
		" 0F 11 00 00 0E 10 21 00 14 26 00 01 'a' 00 01 'b'" + // session expiry 3600, receive max 20, user a=b
		" 00 02 'id'" +
		" 07 01 01 18 00 00 00 05" + // will: payload format 1, will delay 5
		" 00 01 't' 00 01 'x' 00 01 'u' 00 02 'pw'",
		&Connect{Version: Version5, CleanStart: true, KeepAlive: 30,
			Properties: props(func(p *Properties) {
				p.Present = setOf(PropSessionExpiry, PropReceiveMaximum)
				p.SessionExpiry, p.ReceiveMaximum = 3600, 20
				p.User = []UserProperty{{"a", "b"}}
			}),
			ClientID: "id", WillFlag: true,
			WillProperties: props(func(p *Properties) {
				p.Present = setOf(PropPayloadFormat, PropWillDelay)
				p.PayloadFormat, p.WillDelay = 1, 5
			}),
			WillTopic: "t", WillPayload: []byte("x"), UsernameFlag: true, Username: "u",
			PasswordFlag: true, Password: []byte("pw")}},
	{"v5 connect password without username", Version5, "10 10 00 04 'MQTT' 05 40 00 00 00 00 00 00 01 'p'",
		&Connect{Version: Version5, PasswordFlag: true, Password: []byte("p")}},
	{"v5 connack", Version5, "20 12 00 00 0F 12 00 02 'ab' 22 00 0A 24 01 27 00 01 00 00",
		&Connack{Properties: props(func(p *Properties) {
			p.Present = setOf(PropAssignedClientID, PropTopicAliasMaximum, PropMaximumQoS, PropMaximumPacketSize)
			p.AssignedClientID, p.TopicAliasMaximum, p.MaximumQoS, p.MaximumPacketSize = "ab", 10, 1, 65536
		})}},
	{"v5 connack refused", Version5, "20 03 00 87 00", &Connack{ReasonCode: ReasonNotAuthorized}},
	{"v5 publish (doc example)", Version5,
		"32 16 00 03 'a/b' 00 0A 0C 02 00 00 00 3C 26 00 01 'k' 00 01 'v' 'hi'",
		&Publish{QoS: 1, Topic: "a/b", PacketID: 10, Payload: []byte("hi"),
			Properties: props(func(p *Properties) {
				p.Present = setOf(PropMessageExpiry)
				p.MessageExpiry = 60
				p.User = []UserProperty{{"k", "v"}}
			})}},
	{"v5 publish alias and two subscription ids", Version5, "30 0C 00 00 08 0B 01 0B 81 01 23 00 05 'z'",
		&Publish{Payload: []byte("z"), Properties: props(func(p *Properties) {
			p.Present = setOf(PropTopicAlias)
			p.TopicAlias = 5
			p.SubscriptionIdentifiers = []uint32{1, 129}
		})}},
	{"v5 publish user properties order and duplicates", Version5,
		"30 19 00 01 't' 15 26 00 01 'b' 00 01 '1' 26 00 01 'a' 00 01 '2' 26 00 01 'b' 00 01 '3'",
		&Publish{Topic: "t", Properties: props(func(p *Properties) {
			p.User = []UserProperty{{"b", "1"}, {"a", "2"}, {"b", "3"}}
		})}},
	{"v5 puback short", Version5, "40 02 00 0A", &Puback{PacketID: 10}},
	{"v5 puback reason", Version5, "40 03 00 0A 10", &Puback{PacketID: 10, ReasonCode: ReasonNoMatchingSubscribers}},
	{"v5 puback props", Version5, "40 09 00 0A 87 05 1F 00 02 'no'",
		&Puback{PacketID: 10, ReasonCode: ReasonNotAuthorized, Properties: props(func(p *Properties) {
			p.Present = setOf(PropReasonString)
			p.ReasonString = "no"
		})}},
	{"v5 pubrec", Version5, "50 03 00 0A 80", &Pubrec{PacketID: 10, ReasonCode: ReasonUnspecifiedError}},
	{"v5 pubrel", Version5, "62 03 00 0A 92", &Pubrel{PacketID: 10, ReasonCode: ReasonPacketIdentifierNotFound}},
	{"v5 pubcomp", Version5, "70 02 00 0A", &Pubcomp{PacketID: 10}},
	{"v5 subscribe", Version5, "82 1A 00 0B 02 0B 05 00 03 'a/#' 2D 00 0C '$share/g/x/+' 02",
		&Subscribe{PacketID: 11, Properties: props(func(p *Properties) { p.SubscriptionIdentifiers = []uint32{5} }),
			Subscriptions: []Subscription{
				{Filter: "a/#", QoS: 1, NoLocal: true, RetainAsPublished: true, RetainHandling: 2},
				{Filter: "$share/g/x/+", QoS: 2}}}},
	{"v5 suback", Version5, "90 09 00 0B 04 1F 00 01 'r' 01 A2",
		&Suback{PacketID: 11, ReasonCodes: []ReasonCode{ReasonGrantedQoS1, ReasonWildcardSubscriptionsNotSupported},
			Properties: props(func(p *Properties) { p.Present = setOf(PropReasonString); p.ReasonString = "r" })}},
	{"v5 unsubscribe", Version5, "A2 09 00 0C 00 00 01 'a' 00 01 'b'", &Unsubscribe{PacketID: 12, Filters: []string{"a", "b"}}},
	{"v5 unsuback", Version5, "B0 05 00 0C 00 00 11",
		&Unsuback{PacketID: 12, ReasonCodes: []ReasonCode{ReasonSuccess, ReasonNoSubscriptionExisted}}},
	{"v5 pingreq", Version5, "C0 00", &Pingreq{}},
	{"v5 pingresp", Version5, "D0 00", &Pingresp{}},
	{"v5 disconnect short", Version5, "E0 00", &Disconnect{}},
	{"v5 disconnect reason", Version5, "E0 01 04", &Disconnect{ReasonCode: ReasonDisconnectWithWill}},
	{"v5 disconnect props", Version5, "E0 07 04 05 11 00 00 00 00",
		&Disconnect{ReasonCode: ReasonDisconnectWithWill, Properties: props(func(p *Properties) {
			p.Present = setOf(PropSessionExpiry)
		})}},
	{"v5 auth short", Version5, "F0 00", &Auth{}},
	{"v5 auth", Version5, "F0 0D 18 0B 15 00 03 'SCR' 16 00 02 01 02",
		&Auth{ReasonCode: ReasonContinueAuthentication, Properties: props(func(p *Properties) {
			p.Present = setOf(PropAuthMethod, PropAuthData)
			p.AuthMethod, p.AuthData = "SCR", []byte{1, 2}
		})}},
}

// TestMQTTPacketsVectors pins the bytes of every packet type in 3.1.1 and 5
// (hand-built from the specifications) in both directions.
func TestMQTTPacketsVectors(t *testing.T) {
	for _, tc := range vectors {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(tc.hex)
			if want[1] != byte(len(want)-2) {
				t.Fatalf("vector remaining length 0x%02X, body is %d bytes", want[1], len(want)-2)
			}
			got, err := AppendPacket(nil, tc.p, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encode:\n got % X\nwant % X", got, want)
			}
			p, err := Decode(tc.v, want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p, tc.p) {
				t.Errorf("decode:\n got %+v\nwant %+v", p, tc.p)
			}
		})
	}
}

// TestMQTTPacketsLongForms decodes encodings the encoder never produces but
// peers may send: a v5 ack or DISCONNECT with an explicit empty property
// block, a 1-byte AUTH.
func TestMQTTPacketsLongForms(t *testing.T) {
	for _, tc := range []vector{
		{"puback rc 0 empty props", Version5, "40 04 00 0A 00 00", &Puback{PacketID: 10}},
		{"pubrel rc 0 empty props", Version5, "62 04 00 0A 00 00", &Pubrel{PacketID: 10}},
		{"disconnect rc 0 empty props", Version5, "E0 02 00 00", &Disconnect{}},
		{"auth one byte", Version5, "F0 01 19", &Auth{ReasonCode: ReasonReauthenticate}},
		{"v5 connack sp", Version5, "20 03 01 00 00", &Connack{SessionPresent: true}},
	} {
		p, err := Decode(tc.v, hx(tc.hex))
		if err != nil || !reflect.DeepEqual(p, tc.p) {
			t.Errorf("%s: %v\n got %+v\nwant %+v", tc.name, err, p, tc.p)
		}
	}
}

// TestMQTTPacketsVersionDowngrade encodes v5-shaped packets for a 3.1.1 peer:
// properties and reason codes without a 3.1.1 form are left out, failure
// codes are mapped.
func TestMQTTPacketsVersionDowngrade(t *testing.T) {
	withProps := props(func(p *Properties) {
		p.Present = setOf(PropReasonString)
		p.ReasonString = "dropped"
		p.User = []UserProperty{{"k", "v"}}
	})
	for _, tc := range []struct {
		p    Packet
		want string
	}{
		{&Puback{PacketID: 7, ReasonCode: ReasonQuotaExceeded, Properties: withProps}, "40 02 00 07"},
		{&Suback{PacketID: 7, ReasonCodes: []ReasonCode{2, ReasonNotAuthorized, ReasonQuotaExceeded}, Properties: withProps},
			"90 05 00 07 02 80 80"},
		{&Unsuback{PacketID: 7, ReasonCodes: []ReasonCode{ReasonNoSubscriptionExisted}, Properties: withProps}, "B0 02 00 07"},
		{&Connack{ReasonCode: ReasonBadUserNameOrPassword}, "20 02 00 04"},
		{&Connack{ReasonCode: ReasonServerBusy}, "20 02 00 03"},
		{&Connack{ReasonCode: ReasonUnsupportedProtocolVersion}, "20 02 00 01"},
		{&Disconnect{ReasonCode: ReasonServerShuttingDown, Properties: withProps}, "E0 00"},
		{&Publish{Topic: "a", Payload: []byte("p"), Properties: withProps}, "30 04 00 01 'a' 'p'"},
	} {
		got, err := AppendPacket(nil, tc.p, Version311)
		if err != nil || !bytes.Equal(got, hx(tc.want)) {
			t.Errorf("%T: %v\n got % X\nwant % X", tc.p, err, got, hx(tc.want))
		}
	}
}
