package mqtt

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestMQTTRoundStatsCounted: the counts a poller keeps for its round
// (roundstats.go) reach Stats before the client sees what answers its
// request: after each response of an inline handler's call (answered at
// once, and answered later from another goroutine), Received,
// ReceivedQoS, PacketsReceived and BytesReceived already count the
// request, and the reads count the read that brought it.
func TestMQTTRoundStatsCounted(t *testing.T) {
	pending := make(chan asyncReq, 4)
	s, where := inlineServer(t, pending)
	r := connected(t, s.Addrs()[0].String(), packets.Version5, "round-stats")
	st := s.Stats()
	onPollerSeen := 0
	for id := uint16(1); id <= 24; id++ {
		req := inlineRequest(id, 1, "a")
		size, err := packets.AppendPublish(nil, req, packets.Version5)
		if err != nil {
			t.Fatal(err)
		}
		recv, qos1, pkts := st.Received.Load(), st.ReceivedQoS[1].Load(), st.PacketsReceived.Load()
		bytesIn, reads := st.BytesReceived.Load(), s.io.reads.Load()
		r.send(req)
		pub := r.expectPublish()
		if string(pub.Payload) != "a" {
			t.Fatalf("response %q", pub.Payload)
		}
		// Read at once: the response is out, so its request is counted.
		if got := st.Received.Load() - recv; got != 1 {
			t.Fatalf("request %d: Received moved by %d when its response arrived, want 1", id, got)
		}
		if got := st.ReceivedQoS[1].Load() - qos1; got != 1 {
			t.Fatalf("request %d: ReceivedQoS[1] moved by %d, want 1", id, got)
		}
		if got := st.PacketsReceived.Load() - pkts; got < 1 {
			t.Fatalf("request %d: PacketsReceived moved by %d, want at least 1", id, got)
		}
		if got := st.BytesReceived.Load() - bytesIn; got < int64(len(size)) {
			t.Fatalf("request %d: BytesReceived moved by %d, want at least its %d bytes", id, got, len(size))
		}
		if s.io.reads.Load() == reads {
			t.Fatalf("request %d: no read counted", id)
		}
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != id {
			t.Fatalf("want PUBACK %d, got %+v", id, a)
		}
		if w := where(); w[len(w)-1] {
			onPollerSeen++
		}
		if pub.QoS > 0 {
			r.send(&packets.Puback{PacketID: pub.PacketID})
		}
	}
	if onPollerSeen == 0 {
		t.Fatalf("none of 24 requests handled on the poller: %v", where())
	}

	// Answered later, from another goroutine: the PUBACK comes with the
	// request counted.
	recv := st.Received.Load()
	r.send(inlineRequest(41, 1, "L"))
	var q asyncReq
	select {
	case q = <-pending:
	case <-time.After(10 * time.Second):
		t.Fatal("deferred request never reached the handler")
	}
	done := make(chan struct{})
	go func() { defer close(done); q.done(nil) }()
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != 41 {
		t.Fatalf("want PUBACK 41, got %+v", a)
	}
	if got := st.Received.Load() - recv; got != 1 {
		t.Fatalf("deferred request: Received moved by %d when its PUBACK arrived, want 1", got)
	}
	<-done
}

type dropRecycler struct{}

func (dropRecycler) Recycle(*Message) {}

type roundAnswer struct {
	r    *Round
	c    RoundClient
	to   string
	resp *Message
}

func (a *roundAnswer) RoundEnd() {
	if err := a.r.SendToClientRecycled(a.c, a.to, a.resp, dropRecycler{}); err != nil {
		panic(err)
	}
}

// TestMQTTRoundStatsSent: what a poller's round sends is counted
// (Sent, SentQoS, PacketsSent) by the time its client has it, and so is
// the request it answers, and its PUBACK by the time that arrives: an
// answer to the requester sent in the
// handler's call, one deferred to the round's end, and one to another
// client.
func TestMQTTRoundStatsSent(t *testing.T) {
	s := startServer(t, nil).Server
	var onRound atomic.Int64
	s.HandleInline("rreq", func(ctx context.Context, from ClientInfo, msg *Message, _ func() func(error)) error {
		resp := &Message{Topic: "rresp", Payload: bytes.Clone(msg.Payload), QoS: 1}
		r := RoundOf(ctx)
		if r == nil {
			return s.SendToRecycled(from.ClientID, resp, dropRecycler{})
		}
		onRound.Add(1)
		switch string(msg.Payload) {
		case "defer":
			r.Defer(&roundAnswer{r: r, c: r.Client(), to: from.ClientID, resp: resp})
			return nil
		case "other":
			return r.SendToRecycled("round-watcher", resp, dropRecycler{})
		}
		return r.SendToRecycled(from.ClientID, resp, dropRecycler{})
	})
	addr := s.Addrs()[0].String()
	req := connected(t, addr, packets.Version5, "round-req")
	watcher := connected(t, addr, packets.Version5, "round-watcher")
	st := s.Stats()
	for i := uint16(1); i <= 30; i++ {
		kind := []string{"own", "defer", "other"}[i%3]
		recv, sent, sent1, pktsOut := st.Received.Load(), st.Sent.Load(), st.SentQoS[1].Load(), st.PacketsSent.Load()
		req.send(&packets.Publish{QoS: 1, PacketID: i, Topic: "rreq", Payload: []byte(kind)})
		to := req
		if kind == "other" {
			to = watcher
		}
		var pub *packets.Publish
		acked := false
		for pub == nil {
			var p packets.Packet
			if to == watcher && !acked {
				p = req.recv() // the PUBACK first: the watcher's answer may be later
			} else {
				p = to.recv()
			}
			switch p := p.(type) {
			case *packets.Puback:
				if p.PacketID != i || acked {
					t.Fatalf("request %d: unexpected PUBACK %+v", i, p)
				}
				acked = true
			case *packets.Publish:
				pub = p
			default:
				t.Fatalf("request %d: unexpected %T", i, p)
			}
		}
		if string(pub.Payload) != kind {
			t.Fatalf("request %d: response %q, want %q", i, pub.Payload, kind)
		}
		if got := st.Received.Load() - recv; got != 1 {
			t.Fatalf("request %d (%s): Received moved by %d when its answer arrived, want 1", i, kind, got)
		}
		if got := st.Sent.Load() - sent; got != 1 {
			t.Fatalf("request %d (%s): Sent moved by %d when its answer arrived, want 1", i, kind, got)
		}
		if got := st.SentQoS[1].Load() - sent1; got != 1 {
			t.Fatalf("request %d (%s): SentQoS[1] moved by %d, want 1", i, kind, got)
		}
		if got := st.PacketsSent.Load() - pktsOut; got < 1 {
			t.Fatalf("request %d (%s): PacketsSent moved by %d, want at least 1", i, kind, got)
		}
		to.send(&packets.Puback{PacketID: pub.PacketID})
		if !acked {
			if a, ok := req.recv().(*packets.Puback); !ok || a.PacketID != i {
				t.Fatalf("want PUBACK %d, got %+v", i, a)
			}
		}
		// The request's PUBACK, counted in the round when sent there
		// (acks.go ack), is counted by the time it arrives too.
		if got := st.PacketsSent.Load() - pktsOut; got < 2 {
			t.Fatalf("request %d (%s): PacketsSent moved by %d once the answer and the PUBACK arrived, want at least 2", i, kind, got)
		}
	}
	if onRound.Load() == 0 {
		t.Fatal("none of 30 requests handled on the poller")
	}
}
