package packets

import (
	"errors"
	"strings"
	"testing"

	paho "github.com/eclipse/paho.golang/packets"
)

// specPropertyTable is MQTT 5.0 table 2-4 (property identifiers and where
// they are allowed), transcribed independently of properties.go.
var specPropertyTable = map[PropID]string{
	0x01: "PUBLISH WILL", 0x02: "PUBLISH WILL", 0x03: "PUBLISH WILL", 0x08: "PUBLISH WILL",
	0x09: "PUBLISH WILL", 0x0B: "PUBLISH SUBSCRIBE", 0x11: "CONNECT CONNACK DISCONNECT",
	0x12: "CONNACK", 0x13: "CONNACK", 0x15: "CONNECT CONNACK AUTH", 0x16: "CONNECT CONNACK AUTH",
	0x17: "CONNECT", 0x18: "WILL", 0x19: "CONNECT", 0x1A: "CONNACK", 0x1C: "CONNACK DISCONNECT",
	0x1F: "CONNACK PUBACK PUBREC PUBREL PUBCOMP SUBACK UNSUBACK DISCONNECT AUTH",
	0x21: "CONNECT CONNACK", 0x22: "CONNECT CONNACK", 0x23: "PUBLISH", 0x24: "CONNACK", 0x25: "CONNACK",
	0x26: "CONNECT CONNACK PUBLISH WILL PUBACK PUBREC PUBREL PUBCOMP SUBSCRIBE SUBACK UNSUBSCRIBE UNSUBACK DISCONNECT AUTH",
	0x27: "CONNECT CONNACK", 0x28: "CONNACK", 0x29: "CONNACK", 0x2A: "CONNACK",
}

func TestMQTTPacketsPropertyTable(t *testing.T) {
	for id := PropID(0); id < 64; id++ {
		where := specPropertyTable[id]
		if (propKinds[id] != kindNone) != (where != "") {
			t.Errorf("property 0x%02X: known %v, spec %q", byte(id), propKinds[id] != kindNone, where)
		}
		in := map[string]bool{}
		for _, w := range strings.Fields(where) {
			in[w] = true
		}
		if AllowedWillProperties().Has(id) != in["WILL"] {
			t.Errorf("property 0x%02X in will properties: %v", byte(id), !in["WILL"])
		}
		for ty := TypeConnect; ty <= TypeAuth; ty++ {
			if AllowedProperties(ty).Has(id) != in[ty.String()] {
				t.Errorf("property 0x%02X in %s: %v, spec %v", byte(id), ty, AllowedProperties(ty).Has(id), in[ty.String()])
			}
			// paho.golang lumps the will set into CONNECT.
			want := AllowedProperties(ty).Has(id) || (ty == TypeConnect && AllowedWillProperties().Has(id))
			if paho.ValidateID(byte(ty), byte(id)) != want {
				t.Errorf("property 0x%02X in %s: paho says %v", byte(id), ty, !want)
			}
		}
	}
	if AllowedProperties(16) != 0 || AllowedProperties(TypePingreq) != 0 {
		t.Error("properties allowed in PINGREQ or an invalid type")
	}
}

func TestMQTTPacketsNames(t *testing.T) {
	if TypeSubscribe.String() != "SUBSCRIBE" || Type(16).String() != "INVALID" || Type(0).String() != "RESERVED" {
		t.Error("Type.String")
	}
	if Version5.String() != "5.0" || Version311.String() != "3.1.1" || Version31.String() != "3.1" || Version(9).String() != "unknown" {
		t.Error("Version.String")
	}
	if ReasonTopicAliasInvalid.String() != "topic alias invalid" || ReasonCode(0x7F).String() != "unknown reason code" {
		t.Error("ReasonCode.String")
	}
	if !ReasonUnspecifiedError.IsError() || ReasonGrantedQoS2.IsError() {
		t.Error("IsError")
	}
	_, err := Decode(Version5, hx("30 ?? 00 01 '#' 00"))
	if !strings.HasPrefix(err.Error(), "packets: topic name invalid: PUBLISH: ") {
		t.Errorf("error text %q", err)
	}
	_, err = Decode(Version5, hx("00 00"))
	if err.Error() != "packets: malformed packet: reserved packet type 0" {
		t.Errorf("error text %q", err)
	}
	if DefaultOptions().Validate() != nil || (Options{}).Validate() != nil || DefaultOptions().MaxPacketSize != DefaultMaxPacketSize {
		t.Error("default options")
	}
}

func TestMQTTPacketsV3ConnackCode(t *testing.T) {
	for rc, want := range map[ReasonCode]ReasonCode{
		ReasonSuccess: ConnectAccepted, ConnectRefusedNotAuthorized: ConnectRefusedNotAuthorized,
		ReasonUnsupportedProtocolVersion: ConnectRefusedProtocolVersion,
		ReasonClientIdentifierNotValid:   ConnectRefusedIdentifierRejected,
		ReasonBadUserNameOrPassword:      ConnectRefusedBadUsernameOrPassword,
		ReasonBadAuthenticationMethod:    ConnectRefusedBadUsernameOrPassword,
		ReasonNotAuthorized:              ConnectRefusedNotAuthorized, ReasonBanned: ConnectRefusedNotAuthorized,
		ReasonServerBusy: ConnectRefusedServerUnavailable, ReasonMalformedPacket: ConnectRefusedServerUnavailable,
	} {
		if got := V3ConnackCode(rc); got != want {
			t.Errorf("V3ConnackCode(0x%02X) = %d, want %d", byte(rc), got, want)
		}
	}
	if ValidReasonCode(TypePuback, Version311, 0) || ValidReasonCode(17, Version5, 0) {
		t.Error("ValidReasonCode")
	}
	if !errors.Is(newError(ErrEncode, 0, 0, "x"), ErrEncode) {
		t.Error("errors.Is")
	}
}
