package mqtt

import (
	"testing"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// BenchmarkMQTTSendHeld encodes a state store GET's response (MQTT 5,
// QoS 1, response topic, correlation data, user properties, a 100-byte
// value) on a connection a unit of work holds, the way the poller answers
// a request: "direct" is sendPublish (appendHeld encodes into the held
// output), "pooled" the path before it (encoded into a pooled array, then
// copied into the output by writeOut). The output is emptied every 64
// packets, as a round's flush would.
func BenchmarkMQTTSendHeld(b *testing.B) {
	_, c, _ := socketConn(b, 0)
	payload := make([]byte, 105)
	p := packets.Publish{QoS: 1, PacketID: 7, Topic: "clients/azure-cpu-0-17/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response", Payload: payload}
	p.Properties.Present.Add(packets.PropCorrelationData)
	p.Properties.CorrelationData = make([]byte, 16)
	p.Properties.Present.Add(packets.PropMessageExpiry)
	p.Properties.MessageExpiry = 10
	p.Properties.User = []packets.UserProperty{{Key: "__ts", Value: "0001764221811000:00000:statestore"}, {Key: "__protVer", Value: "1.0"}, {Key: "__stat", Value: "200"}}
	pooled := func(c *conn, p *packets.Publish) bool {
		bp := encBufs.Get().(*[]byte)
		defer putEncBuf(bp)
		out, err := packets.AppendPublish((*bp)[:0], p, c.version)
		if err != nil {
			return false
		}
		*bp = out
		return c.writePacket(out)
	}
	for _, bc := range []struct {
		name string
		send func(*conn, *packets.Publish) bool
	}{{"direct", func(c *conn, p *packets.Publish) bool { ok, _ := c.sendPublish(p); return ok }}, {"pooled", pooled}} {
		b.Run(bc.name, func(b *testing.B) {
			c.fl.hold(c)
			n := 0
			defer c.fl.release()
			for b.Loop() {
				if !bc.send(c, &p) {
					b.Fatal("not sent")
				}
				if n++; n%64 == 0 {
					c.outMu.Lock()
					c.out = c.out[:0]
					c.outMu.Unlock()
				}
			}
		})
	}
}
