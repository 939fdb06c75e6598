package mqtt

import (
	"context"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// A message in flight that its client's next connection cannot take (over
// the Maximum Packet Size that connection set) is dropped when the session
// resumes, as a new message would be: left in flight, it held the
// client's only receive-maximum slot and nothing after it was delivered.
func TestMQTTResentMessageTooLargeLeavesFlight(t *testing.T) {
	ts := startServer(t, nil)
	connect := func(maxPacket uint32) *rawClient {
		r := dialRaw(t, ts.addr, v5)
		cp := &packets.Connect{ClientID: "resume-small", CleanStart: maxPacket == 0, KeepAlive: 60}
		cp.Properties.Present = propSet(packets.PropReceiveMaximum, packets.PropSessionExpiry)
		cp.Properties.ReceiveMaximum, cp.Properties.SessionExpiry = 1, 300
		if maxPacket > 0 {
			cp.Properties.Present.Add(packets.PropMaximumPacketSize)
			cp.Properties.MaximumPacketSize = maxPacket
		}
		if ack := r.connect(cp); ack.ReasonCode != 0 || (maxPacket > 0 && !ack.SessionPresent) {
			t.Fatalf("CONNACK %v, session present %v", ack.ReasonCode, ack.SessionPresent)
		}
		return r
	}
	r := connect(0)
	r.subscribe(1, sub("big/#", 1))
	ctx := context.Background()
	if err := ts.Publish(ctx, &Message{Topic: "big/1", QoS: 1, Payload: []byte(strings.Repeat("b", 2000))}); err != nil {
		t.Fatal(err)
	}
	if got := r.expectPublish(); len(got.Payload) != 2000 {
		t.Fatalf("first delivery: %d bytes", len(got.Payload))
	}
	// Not acknowledged; the session resumes on a connection that takes
	// packets of at most 512 bytes.
	r.send(&packets.Disconnect{})
	r.closed()
	r = connect(512)
	if err := ts.Publish(ctx, &Message{Topic: "big/2", QoS: 1, Payload: []byte("small")}); err != nil {
		t.Fatal(err)
	}
	if got := r.expectPublish(); string(got.Payload) != "small" {
		t.Fatalf("got %q, want the message after the one too large to resend", got.Payload)
	}
}
