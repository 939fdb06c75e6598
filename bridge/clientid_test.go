package bridge

import (
	"strings"
	"testing"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestClientIDBound: a client id of MaxClientIDLen bytes connects with a
// clean or a persistent session, publishes at QoS 1 and (persistent)
// resumes its stored session; one byte more is refused at CONNECT with
// 0x85 (3.1.1: 0x02) instead of 0x88 on every retry (persistent) or 0x80
// on every QoS 1 publish (clean), as a record could not hold it. So is a
// user name, which goes into the same records: a client id and user name
// of MaxIdentityLen bytes together connect and publish; one byte more is
// refused with 0x86 (3.1.1: 0x04) instead of 0x80 on every publish.
func TestClientIDBound(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, nil)
	addr := addrOf(b)
	if MaxClientIDLen <= 0 || MaxClientIDLen >= 32767 {
		t.Fatalf("MaxClientIDLen %d", MaxClientIDLen)
	}
	for _, v := range []packets.Version{packets.Version311, packets.Version5} {
		for _, clean := range []bool{true, false} {
			name := map[packets.Version]string{packets.Version311: "3.1.1", packets.Version5: "5"}[v]
			if clean {
				name += "/clean"
			} else {
				name += "/persistent"
			}
			t.Run(name, func(t *testing.T) {
				tag := strings.NewReplacer(".", "", "/", "-").Replace(name)
				connectAs := func(id, user string) (*rawClient, *packets.Connack) {
					r := dialRaw(t, addr, v)
					cp := &packets.Connect{ClientID: id, CleanStart: clean, KeepAlive: 60, UsernameFlag: user != "", Username: user}
					if v == packets.Version5 && !clean {
						cp.Properties.Present.Add(packets.PropSessionExpiry)
						cp.Properties.SessionExpiry = 3600
					}
					return r, r.Connect(cp)
				}
				connect := func(id string) (*rawClient, *packets.Connack) { return connectAs(id, "") }
				over := tag + strings.Repeat("x", MaxClientIDLen+1-len(tag))
				r, ack := connect(over)
				want := packets.ReasonClientIdentifierNotValid
				if v == packets.Version311 {
					want = packets.ConnectRefusedIdentifierRejected
				}
				if ack.ReasonCode != want {
					t.Fatalf("%d-byte id: CONNACK %#x, want %#x", len(over), byte(ack.ReasonCode), byte(want))
				}
				if v == packets.Version5 && !strings.Contains(ack.Properties.ReasonString, "at most") {
					t.Errorf("reason string %q", ack.Properties.ReasonString)
				}
				r.Closed()

				uid := "u" + tag
				r, ack = connectAs(uid, strings.Repeat("n", MaxIdentityLen+1-len(uid)))
				want = packets.ReasonBadUserNameOrPassword
				if v == packets.Version311 {
					want = packets.ConnectRefusedBadUsernameOrPassword
				}
				if ack.ReasonCode != want {
					t.Fatalf("user name over the bound: CONNACK %#x, want %#x", byte(ack.ReasonCode), byte(want))
				}
				if v == packets.Version5 && !strings.Contains(ack.Properties.ReasonString, "together") {
					t.Errorf("reason string %q", ack.Properties.ReasonString)
				}
				r.Closed()

				// The PUBACK and the delivery of the message back come in
				// either order.
				roundTrip := func(r *rawClient, topic string) {
					t.Helper()
					if sa := r.subscribe(1, sub(topic, 1)); sa.ReasonCodes[0] != 1 {
						t.Fatalf("SUBACK %v", sa.ReasonCodes)
					}
					r.send(&packets.Publish{Topic: topic, QoS: 1, PacketID: 2, Payload: []byte("p")})
					for acked, got := false, false; !acked || !got; {
						switch p := r.recv().(type) {
						case *packets.Puback:
							if p.ReasonCode != 0 {
								t.Fatalf("%s: PUBACK %v", topic, p.ReasonCode)
							}
							acked = true
						case *packets.Publish:
							if string(p.Payload) != "p" {
								t.Fatalf("payload %q", p.Payload)
							}
							r.send(&packets.Puback{PacketID: p.PacketID})
							got = true
						default:
							t.Fatalf("unexpected %T", p)
						}
					}
					r.disconnect()
				}
				r, ack = connectAs(uid, strings.Repeat("n", MaxIdentityLen-len(uid)))
				if ack.ReasonCode != 0 {
					t.Fatalf("user name at the bound: CONNACK %v", ack.ReasonCode)
				}
				roundTrip(r, "uid/"+tag)

				at := tag + strings.Repeat("y", MaxClientIDLen-len(tag))
				r, ack = connect(at)
				if ack.ReasonCode != 0 {
					t.Fatalf("%d-byte id: CONNACK %v", len(at), ack.ReasonCode)
				}
				roundTrip(r, "cid/"+tag)
				if clean {
					return
				}
				r, ack = connect(at)
				defer r.disconnect()
				if ack.ReasonCode != 0 || !ack.SessionPresent {
					t.Fatalf("resume: CONNACK %v, session present %v", ack.ReasonCode, ack.SessionPresent)
				}
			})
		}
	}
}
