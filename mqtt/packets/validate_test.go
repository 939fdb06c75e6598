package packets

import (
	"errors"
	"testing"
)

type badCase struct {
	name string
	v    Version
	hex  string
	want error
}

var badCases = []badCase{
	// fixed header
	{"reserved type 0", Version5, "00 00", ErrMalformed},
	{"pingreq flags", Version311, "C1 ??", ErrMalformed},
	{"pubrel flags 0000", Version311, "60 ?? 00 01", ErrMalformed},
	{"subscribe flags 0000", Version311, "80 ?? 00 01 00 01 'a' 00", ErrMalformed},
	{"unsubscribe flags 0011", Version311, "A3 ?? 00 01 00 01 'a'", ErrMalformed},
	{"connect flags", Version311, "11 ??", ErrMalformed},
	{"publish QoS 3", Version311, "36 ?? 00 01 'a' 00 01", ErrMalformed},
	{"remaining length 5 bytes", Version311, "30 80 80 80 80 01", ErrMalformed},
	{"remaining length not minimal", Version311, "C0 80 00", ErrMalformed},
	{"auth before v5", Version311, "F0 ??", ErrMalformed},
	{"packet before connect", 0, "C0 ??", ErrProtocol},

	// trailing and short bodies
	{"pingreq with body", Version311, "C0 ?? 00", ErrMalformed},
	{"v3 disconnect with body", Version311, "E0 ?? 00", ErrMalformed},
	{"v3 puback trailing", Version311, "40 ?? 00 01 00", ErrMalformed},
	{"v3 unsuback trailing", Version311, "B0 ?? 00 01 00", ErrMalformed},
	{"v5 connack trailing", Version5, "20 ?? 00 00 00 00", ErrMalformed},
	{"connect trailing", Version311, "10 ?? 00 04 'MQTT' 04 00 00 00 00 00 FF", ErrMalformed},
	{"connect truncated client id", Version311, "10 ?? 00 04 'MQTT' 04 00 00 00 00 05", ErrMalformed},
	{"publish topic past end", Version311, "30 ?? 00 05 'a'", ErrMalformed},
	{"v5 publish no property length", Version5, "30 ?? 00 01 'a'", ErrMalformed},
	{"v311 connack short", Version311, "20 ?? 00", ErrMalformed},

	// connect
	{"protocol name", Version311, "10 ?? 00 04 'MQTX' 04 00 00 00 00 00", ErrUnsupportedProtocol},
	{"protocol level 6", Version311, "10 ?? 00 04 'MQTT' 06 00 00 00 00 00", ErrUnsupportedProtocol},
	{"MQIsdp level 4", Version311, "10 ?? 00 06 'MQIsdp' 04 00 00 00 00 00", ErrUnsupportedProtocol},
	{"connect reserved flag", Version311, "10 ?? 00 04 'MQTT' 04 01 00 00 00 00", ErrMalformed},
	{"will QoS 3", Version311, "10 ?? 00 04 'MQTT' 04 1C 00 00 00 00 00 01 't' 00 00", ErrMalformed},
	{"will QoS without will", Version311, "10 ?? 00 04 'MQTT' 04 08 00 00 00 00", ErrMalformed},
	{"will retain without will", Version311, "10 ?? 00 04 'MQTT' 04 20 00 00 00 00", ErrMalformed},
	{"v311 password without user", Version311, "10 ?? 00 04 'MQTT' 04 40 00 00 00 00 00 01 'p'", ErrProtocol},
	{"will topic wildcard", Version311, "10 ?? 00 04 'MQTT' 04 04 00 00 00 00 00 01 '#' 00 00", ErrTopicNameInvalid},
	{"client id invalid UTF-8", Version311, "10 ?? 00 04 'MQTT' 04 00 00 00 00 01 FF", ErrMalformed},
	{"client id U+0000", Version311, "10 ?? 00 04 'MQTT' 04 00 00 00 00 01 00", ErrMalformed},
	{"client id surrogate", Version311, "10 ?? 00 04 'MQTT' 04 00 00 00 00 03 ED A0 80", ErrMalformed},
	{"user name overlong UTF-8", Version311, "10 ?? 00 04 'MQTT' 04 80 00 00 00 00 00 02 C0 80", ErrMalformed},
	// will properties are checked against the will set: session expiry is
	// a CONNECT property, not a will property
	{"will property from connect set", Version5,
		"10 ?? 00 04 'MQTT' 05 04 00 00 00 00 00 05 11 00 00 00 01 00 01 't' 00 00", ErrMalformed},
	// ... and will delay is a will property, not a CONNECT property
	{"connect property from will set", Version5, "10 ?? 00 04 'MQTT' 05 00 00 00 05 18 00 00 00 01 00 00", ErrMalformed},

	// connack
	{"connack reserved flags", Version311, "20 ?? 02 00", ErrMalformed},
	{"v3 connack code 6", Version311, "20 ?? 00 06", ErrProtocol},
	{"v5 connack bad reason", Version5, "20 ?? 00 04 00", ErrProtocol},
	{"connack session present refused", Version311, "20 ?? 01 05", ErrProtocol},

	// publish
	{"publish wildcard +", Version311, "30 ?? 00 03 'a/+'", ErrTopicNameInvalid},
	{"publish wildcard #", Version5, "30 ?? 00 01 '#' 00", ErrTopicNameInvalid},
	{"v3 publish empty topic", Version311, "30 ?? 00 00", ErrTopicNameInvalid},
	{"v5 publish empty topic without alias", Version5, "30 ?? 00 00 00", ErrProtocol},
	{"publish topic U+0000", Version311, "30 ?? 00 01 00", ErrMalformed},
	{"publish topic invalid UTF-8", Version311, "30 ?? 00 02 C3 28", ErrMalformed},
	{"publish packet id 0", Version311, "32 ?? 00 01 'a' 00 00", ErrProtocol},
	{"publish DUP with QoS 0", Version311, "38 ?? 00 01 'a'", ErrMalformed},
	{"topic alias 0", Version5, "30 ?? 00 00 03 23 00 00 'x'", ErrTopicAliasInvalid},
	{"subscription id 0", Version5, "30 ?? 00 01 'a' 02 0B 00", ErrProtocol},
	{"subscription id 5 bytes", Version5, "30 ?? 00 01 'a' 05 0B 80 80 80 80", ErrMalformed},
	{"response topic wildcard", Version5, "30 ?? 00 01 'a' 05 08 00 02 'a+'", ErrTopicNameInvalid},
	// Topics of eight bytes and more go through plainTopic's words.
	{"publish wildcard + in a word", Version311, "30 ?? 00 0A 'abcdef+/gh'", ErrTopicNameInvalid},
	{"publish wildcard # after a word", Version5, "30 ?? 00 0A 'abcdefgh/#' 00", ErrTopicNameInvalid},
	{"publish topic U+0000 in a word", Version311, "30 ?? 00 09 'abc' 00 'efghi'", ErrMalformed},
	{"publish topic invalid UTF-8 in a word", Version311, "30 ?? 00 09 'abcdefg' C3 28", ErrMalformed},
	{"empty response topic", Version5, "30 ?? 00 01 'a' 03 08 00 00", ErrTopicNameInvalid},
	{"response topic wildcard in a word", Version5, "30 ?? 00 01 'a' 0D 08 00 0A 'abcdefgh/#'", ErrTopicNameInvalid},
	{"response topic + in a word", Version5, "30 ?? 00 01 'a' 0D 08 00 0A 'abc+efgh/i'", ErrTopicNameInvalid},
	{"response topic U+0000 in a word", Version5, "30 ?? 00 01 'a' 0C 08 00 09 'abc' 00 'efghi'", ErrMalformed},
	{"response topic invalid UTF-8", Version5, "30 ?? 00 01 'a' 0C 08 00 09 'abcdefg' C3 28", ErrMalformed},

	// properties
	{"duplicate property", Version5, "30 ?? 00 01 'a' 0A 02 00 00 00 01 02 00 00 00 02", ErrProtocol},
	{"duplicate topic alias", Version5, "30 ?? 00 01 'a' 06 23 00 01 23 00 02", ErrProtocol},
	{"property not allowed in publish", Version5, "30 ?? 00 01 'a' 05 11 00 00 00 01", ErrMalformed},
	{"reason string in connect", Version5, "10 ?? 00 04 'MQTT' 05 00 00 00 04 1F 00 01 'r' 00 00", ErrMalformed},
	{"unknown property", Version5, "30 ?? 00 01 'a' 02 07 00", ErrMalformed},
	{"property id non-minimal varint", Version5, "30 ?? 00 01 'a' 03 81 00 01", ErrMalformed},
	{"property past block", Version5, "30 ?? 00 01 'a' 02 02 00 00 00", ErrMalformed},
	{"property length past packet", Version5, "30 ?? 00 01 'a' 09 01", ErrMalformed},
	{"property length 5 bytes", Version5, "30 ?? 00 01 'a' 80 80 80 80 01", ErrMalformed},
	{"user property invalid UTF-8", Version5, "30 ?? 00 01 'a' 07 26 00 01 FF 00 01 'v'", ErrMalformed},
	{"content type U+0000", Version5, "30 ?? 00 01 'a' 04 03 00 01 00", ErrMalformed},
	{"payload format 2", Version5, "30 ?? 00 01 'a' 02 01 02", ErrProtocol},
	{"receive maximum 0", Version5, "10 ?? 00 04 'MQTT' 05 00 00 00 03 21 00 00 00 00", ErrProtocol},
	{"maximum packet size 0", Version5, "10 ?? 00 04 'MQTT' 05 00 00 00 05 27 00 00 00 00 00 00", ErrProtocol},
	{"request problem info 2", Version5, "10 ?? 00 04 'MQTT' 05 00 00 00 02 17 02 00 00", ErrProtocol},
	{"maximum QoS 2", Version5, "20 ?? 00 00 02 24 02", ErrProtocol},
	{"auth data without method", Version5, "F0 ?? 18 04 16 00 01 01", ErrProtocol},
	{"two subscription ids in subscribe", Version5, "82 ?? 00 01 04 0B 01 0B 02 00 01 'a' 00", ErrProtocol},

	// acks
	{"puback packet id 0", Version311, "40 ?? 00 00", ErrProtocol},
	{"v5 puback bad reason", Version5, "40 ?? 00 01 92", ErrProtocol},
	{"v5 pubrel bad reason", Version5, "62 ?? 00 01 10", ErrProtocol},
	{"v5 puback property not allowed", Version5, "40 ?? 00 01 00 02 01 00", ErrMalformed},
	{"v5 disconnect bad reason", Version5, "E0 ?? 05", ErrProtocol},
	{"v5 auth bad reason", Version5, "F0 ?? 01", ErrProtocol},
	{"v3 suback bad code", Version311, "90 ?? 00 01 03", ErrProtocol},
	{"v5 suback bad code", Version5, "90 ?? 00 01 00 11", ErrProtocol},
	{"suback no codes", Version311, "90 ?? 00 01", ErrProtocol},
	{"v5 unsuback no codes", Version5, "B0 ?? 00 01 00", ErrProtocol},
	{"suback packet id 0", Version311, "90 ?? 00 00 00", ErrProtocol},

	// subscribe / unsubscribe
	{"empty subscribe", Version311, "82 ?? 00 01", ErrProtocol},
	{"empty v5 subscribe", Version5, "82 ?? 00 01 00", ErrProtocol},
	{"empty unsubscribe", Version311, "A2 ?? 00 01", ErrProtocol},
	{"subscribe packet id 0", Version311, "82 ?? 00 00 00 01 'a' 00", ErrProtocol},
	{"unsubscribe packet id 0", Version311, "A2 ?? 00 00 00 01 'a'", ErrProtocol},
	{"subscribe missing options", Version311, "82 ?? 00 01 00 01 'a'", ErrMalformed},
	{"v3 subscribe reserved option bits", Version311, "82 ?? 00 01 00 01 'a' 04", ErrMalformed},
	{"v5 subscribe reserved option bits", Version5, "82 ?? 00 01 00 00 01 'a' 40", ErrMalformed},
	{"subscribe QoS 3", Version311, "82 ?? 00 01 00 01 'a' 03", ErrMalformed},
	{"retain handling 3", Version5, "82 ?? 00 01 00 00 01 'a' 30", ErrProtocol},
	{"no local on shared", Version5, "82 ?? 00 01 00 00 0C '$share/g/a/b' 04", ErrProtocol},
	{"filter # not last", Version311, "82 ?? 00 01 00 03 '#/a' 00", ErrTopicFilterInvalid},
	{"filter a#", Version311, "82 ?? 00 01 00 02 'a#' 00", ErrTopicFilterInvalid},
	{"filter a+/b", Version311, "82 ?? 00 01 00 04 'a+/b' 00", ErrTopicFilterInvalid},
	{"filter empty", Version311, "82 ?? 00 01 00 00 00", ErrTopicFilterInvalid},
	{"shared without filter", Version311, "82 ?? 00 01 00 09 '$share/g/' 00", ErrTopicFilterInvalid},
	{"shared group wildcard", Version311, "82 ?? 00 01 00 0A '$share/+/a' 00", ErrTopicFilterInvalid},
	{"shared empty group", Version311, "82 ?? 00 01 00 09 '$share//a' 00", ErrTopicFilterInvalid},
	{"unsubscribe invalid filter", Version311, "A2 ?? 00 01 00 02 '#a'", ErrTopicFilterInvalid},
	{"unsubscribe filter U+0000", Version311, "A2 ?? 00 01 00 01 00", ErrMalformed},
}

// TestMQTTPacketsValidation feeds one packet per validation rule and checks
// the error class, its reason code, and that the fixed header still parsed
// (or not) consistently.
func TestMQTTPacketsValidation(t *testing.T) {
	for _, tc := range badCases {
		t.Run(tc.name, func(t *testing.T) {
			b := hx(tc.hex)
			p, err := Decode(tc.v, b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v (%+v), want %v", err, p, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%v is not an *Error", err)
			}
			if e.ReasonCode() != ReasonCodeOf(tc.want) || e.ReasonCode() < 0x80 {
				t.Fatalf("reason code %v", e.ReasonCode())
			}
			if _, err := Decode(tc.v, append(b, 0xC0, 0x00)); err == nil {
				t.Fatal("accepted with a packet appended")
			}
		})
	}
}

func TestMQTTPacketsReasonCodeOf(t *testing.T) {
	for err, want := range map[error]ReasonCode{
		nil:                    ReasonSuccess,
		ErrMalformed:           ReasonMalformedPacket,
		ErrProtocol:            ReasonProtocolError,
		ErrTopicNameInvalid:    ReasonTopicNameInvalid,
		ErrTopicFilterInvalid:  ReasonTopicFilterInvalid,
		ErrTopicAliasInvalid:   ReasonTopicAliasInvalid,
		ErrPacketTooLarge:      ReasonPacketTooLarge,
		ErrUnsupportedProtocol: ReasonUnsupportedProtocolVersion,
		errors.New("other"):    ReasonUnspecifiedError,
	} {
		if got := ReasonCodeOf(err); got != want {
			t.Errorf("ReasonCodeOf(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestMQTTPacketsConnectErrorVersion checks that a CONNECT failure tells the
// server which protocol level the client asked for, so it can answer in the
// right CONNACK format.
func TestMQTTPacketsConnectErrorVersion(t *testing.T) {
	for hexs, want := range map[string]Version{
		"10 0C 00 04 'MQTT' 06 00 00 00 00 00":                      6,
		"10 0C 00 04 'MQTT' 04 01 00 00 00 00":                      Version311,
		"10 12 00 04 'MQTT' 05 00 00 00 03 21 00 00 00 00 00 00 00": Version5,
	} {
		_, err := Decode(0, hx(hexs))
		var e *Error
		if !errors.As(err, &e) || e.Version != want || e.Packet != TypeConnect {
			t.Errorf("%s: %v (%+v), want version %d", hexs, err, e, want)
		}
	}
}

// TestMQTTPacketsMaxPacketSize checks that the limit is applied from the
// fixed header alone, even from a partial remaining length, before the body
// arrives.
func TestMQTTPacketsMaxPacketSize(t *testing.T) {
	d, err := NewDecoder(Options{MaxPacketSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	// 98-byte body + 2-byte header = 100: accepted once complete.
	pub := append(hx("30 62 00 01 'a'"), make([]byte, 95)...)
	if _, err := d.Decode(Version311, pub); err != nil {
		t.Fatalf("100-byte packet: %v", err)
	}
	for _, tc := range []struct {
		hex  string
		want error
	}{
		{"30 63", ErrPacketTooLarge},          // 99 + 2 = 101
		{"30 80", ErrPacketTooLarge},          // at least 128 + 3
		{"30 FF FF FF 7F", ErrPacketTooLarge}, // the protocol maximum
		{"30 FF FF FF FF", ErrMalformed},
		{"30", ErrIncomplete},
		{"30 62", nil},
	} {
		_, _, _, _, err := d.DecodeFixedHeader(hx(tc.hex))
		if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
			t.Errorf("%s: %v, want %v", tc.hex, err, tc.want)
		}
	}
	if _, err := NewDecoder(Options{MaxPacketSize: 1}); err == nil {
		t.Error("MaxPacketSize 1 accepted")
	}
	if _, err := NewDecoder(Options{MaxPacketSize: MaxPacketSizeLimit + 1}); err == nil {
		t.Error("MaxPacketSize over the protocol limit accepted")
	}
	// The default decoder caps at 1 MiB.
	if _, _, _, _, err := DecodeFixedHeader(hx("30 80 80 40")); !errors.Is(err, ErrPacketTooLarge) {
		t.Errorf("1 MiB body with the default decoder: %v", err)
	}
}

// TestMQTTPacketsEncodeErrors checks that the encoder refuses what the
// decoder would refuse, and leaves dst untouched.
func TestMQTTPacketsEncodeErrors(t *testing.T) {
	long := string(make([]byte, 65536))
	for _, tc := range []struct {
		name string
		v    Version
		p    Packet
	}{
		{"publish QoS 3", Version311, &Publish{QoS: 3, Topic: "a", PacketID: 1}},
		{"publish id 0", Version311, &Publish{QoS: 1, Topic: "a"}},
		{"publish wildcard", Version5, &Publish{Topic: "a/#"}},
		{"publish empty topic v3", Version311, &Publish{Topic: "", Properties: props(func(p *Properties) {
			p.Present = setOf(PropTopicAlias)
			p.TopicAlias = 1
		})}},
		{"publish long topic", Version311, &Publish{Topic: long}},
		{"publish connect property", Version5, &Publish{Topic: "a", Properties: props(func(p *Properties) {
			p.Present = setOf(PropSessionExpiry)
		})}},
		{"publish topic alias 0", Version5, &Publish{Topic: "a", Properties: props(func(p *Properties) {
			p.Present = setOf(PropTopicAlias)
		})}},
		{"puback bad reason", Version5, &Puback{PacketID: 1, ReasonCode: ReasonBanned}},
		{"subscribe empty", Version311, &Subscribe{PacketID: 1}},
		{"subscribe bad filter", Version311, &Subscribe{PacketID: 1, Subscriptions: []Subscription{{Filter: "a/#/b"}}}},
		{"subscribe two ids", Version5, &Subscribe{PacketID: 1, Subscriptions: []Subscription{{Filter: "a"}},
			Properties: props(func(p *Properties) { p.SubscriptionIdentifiers = []uint32{1, 2} })}},
		{"unsubscribe empty", Version311, &Unsubscribe{PacketID: 1}},
		{"suback empty", Version5, &Suback{PacketID: 1}},
		{"auth in 3.1.1", Version311, &Auth{}},
		{"connect version mismatch", Version311, &Connect{Version: Version5}},
		{"connect will qos without will", Version311, &Connect{WillQoS: 1}},
		{"bad version", 9, &Pingreq{}},
		{"nil", Version5, nil},
		{"subscription id too large", Version5, &Publish{Topic: "a", Properties: props(func(p *Properties) {
			p.SubscriptionIdentifiers = []uint32{MaxVarInt + 1}
		})}},
	} {
		dst := []byte{1, 2, 3}
		got, err := AppendPacket(dst, tc.p, tc.v)
		if !errors.Is(err, ErrEncode) || len(got) != 3 {
			t.Errorf("%s: err %v, dst %d bytes", tc.name, err, len(got))
		}
		if _, err := Size(tc.p, tc.v); !errors.Is(err, ErrEncode) {
			t.Errorf("%s: Size err %v", tc.name, err)
		}
	}
}
