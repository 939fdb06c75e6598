package mqtt

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// syncBackend hides MemoryBackend's PublishAsync: a server on it has no
// AsyncBackend.
type syncBackend struct{ Backend }

// asyncReq is one request an AsyncHandler left pending.
type asyncReq struct {
	from ClientInfo
	msg  *Message
	done func(error)
}

// TestMQTTHandleAsync: an AsyncHandler that calls later returns without
// answering and the connection keeps being served (requests 1 and 3 reach
// the handler while 1 is pending, 2 is answered at once); each deferred
// response goes out when the test completes it, and the acknowledgements
// leave in PUBLISH order, each after its response, with the handler's
// error as the reason code. The same holds on a server whose backend is
// synchronous.
func TestMQTTHandleAsync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend func() Backend
	}{
		{"async backend", func() Backend { return NewMemoryBackend() }},
		{"sync backend", func() Backend { return syncBackend{NewMemoryBackend()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Listen = []string{"127.0.0.1:0"}
			opts.Logger = slog.New(slog.DiscardHandler)
			s, err := NewServer(opts, tc.backend())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			respond := func(from ClientInfo, msg *Message) {
				if err := s.SendTo(from.ClientID, &Message{Topic: msg.ResponseTopic, Payload: msg.Payload, QoS: 1}); err != nil {
					t.Error(err)
				}
			}
			pending := make(chan asyncReq, 4)
			s.HandleAsync("areq/+", func(_ context.Context, from ClientInfo, msg *Message, later func() func(error)) error {
				if msg.Payload[0] == 2 { // answered at once
					respond(from, msg)
					return nil
				}
				pending <- asyncReq{from, msg, later()}
				return nil
			})
			r := connected(t, s.Addrs()[0].String(), packets.Version5, "async-rr")
			for id := uint16(1); id <= 3; id++ {
				req := &packets.Publish{QoS: 1, PacketID: id, Topic: "areq/x", Payload: []byte{byte(id)}}
				req.Properties.Present.Add(packets.PropResponseTopic)
				req.Properties.ResponseTopic = "aresp/x"
				r.send(req)
			}
			var reqs []asyncReq
			for len(reqs) < 2 {
				select {
				case q := <-pending:
					reqs = append(reqs, q)
				case <-time.After(10 * time.Second):
					t.Fatalf("%d of 2 deferred requests reached the handler while the first was pending", len(reqs))
				}
			}
			if pub := r.expectPublish(); pub.Payload[0] != 2 {
				t.Fatalf("first response carries %v, want request 2's (answered at once)", pub.Payload)
			}
			r.nothing(50 * time.Millisecond) // request 2's PUBACK waits for request 1's
			// Complete the last first: its response goes out, its PUBACK
			// waits for the earlier ones.
			complete := func(q asyncReq, err error) {
				respond(q.from, q.msg)
				q.done(err)
			}
			go complete(reqs[1], nil)
			if pub := r.expectPublish(); pub.Payload[0] != 3 {
				t.Fatalf("second response carries %v, want request 3's", pub.Payload)
			}
			r.nothing(50 * time.Millisecond)
			go complete(reqs[0], ErrNotAuthorized)
			if pub := r.expectPublish(); pub.Payload[0] != 1 {
				t.Fatalf("third response carries %v, want request 1's", pub.Payload)
			}
			for id, want := range []packets.ReasonCode{packets.ReasonNotAuthorized, 0, 0} {
				p := r.recv()
				a, ok := p.(*packets.Puback)
				if !ok || a.PacketID != uint16(id+1) || a.ReasonCode != want {
					t.Fatalf("acknowledgement %d: got %T %+v, want PUBACK %d reason %v", id, p, p, id+1, want)
				}
			}
		})
	}
}
