package mqtt

import (
	"fmt"
	"testing"
	"time"

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
	}{{"direct", func(c *conn, p *packets.Publish) bool { ok, _ := c.sendPublish(p, nil); return ok }}, {"pooled", pooled}} {
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

// BenchmarkMQTTRoundSend: a state store response handed to its
// requester's session, through the server (Server.SendToRecycled: the
// session table under the server's lock, a clock read for the expiry)
// and through the poller's round (Round.SendToRecycled: the connection's
// session, the round's clock reading).
func BenchmarkMQTTRoundSend(b *testing.B) {
	s, c, _ := socketConn(b, 0)
	const id = "azure-cpu-0-17"
	ss := s.newSession(id)
	ss.conn, c.session, c.sendQuota = c, ss, maxInflightOut
	s.mu.Lock()
	for i := range 5000 { // a server's worth of other sessions
		s.sessions[fmt.Sprintf("azure-cpu-%d", i)] = s.newSession(fmt.Sprintf("azure-cpu-%d", i))
	}
	s.sessions[id] = ss
	s.mu.Unlock()
	r := &Round{srv: s, cur: c}
	rc := r.Client()
	end := &Round{srv: s}
	msg := &Message{Topic: "clients/azure-cpu-0-17/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response",
		Payload: make([]byte, 105), QoS: 1, CorrelationData: make([]byte, 16), Expiry: time.Now().Add(time.Minute),
		User: []UserProperty{{Key: "__stat", Value: "200"}, {Key: "__protVer", Value: "1.0"}, {Key: "__ts", Value: "000001764221811:00000:n"}}}
	for _, bc := range []struct {
		name string
		send func() error
	}{
		{"server", func() error { return s.SendToRecycled(id, msg, nil) }},
		{"round", func() error { return r.SendToRecycled(id, msg, nil) }},
		// At the round's end (no connection being handled): a SET's
		// answer, by lookup or by the session its handler's call named.
		{"roundEnd", func() error { return end.SendToRecycled(id, msg, nil) }},
		{"roundEndClient", func() error { return end.SendToClientRecycled(rc, id, msg, nil) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c.fl.hold(c)
			defer c.fl.release()
			n := 0
			for b.Loop() {
				if err := bc.send(); err != nil {
					b.Fatal(err)
				}
				if n++; n%16 == 0 {
					c.outMu.Lock()
					c.out = c.out[:0]
					c.outMu.Unlock()
					ss.mu.Lock()
					ss.inflight = ss.inflight[:0]
					ss.mu.Unlock()
				}
			}
		})
	}
}
