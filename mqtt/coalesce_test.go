package mqtt

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Write coalescing and read avoidance (batch.go, netio.go), counted with
// the server's syscall counters.

// TestMQTTCoalesceRequestResponse: a request whose handler answers the
// same client synchronously (the state store's GET) costs one write(2)
// (response PUBLISH and PUBACK together, the response first) and one
// read(2) (no read for EAGAIN after a short one).
func TestMQTTCoalesceRequestResponse(t *testing.T) {
	ts := startServer(t, nil)
	ts.Handle("req/+", func(ctx context.Context, from ClientInfo, msg *Message) error {
		return ts.SendTo(from.ClientID, &Message{Topic: msg.ResponseTopic, Payload: msg.Payload, QoS: 1,
			CorrelationData: msg.CorrelationData})
	})
	r := connected(t, ts.addr, packets.Version5, "rr")
	const n = 200
	var prevResp uint16
	var w0, r0 int64
	for i := 0; i <= n; i++ {
		if i == 1 { // the first request warms up; count the rest
			w0, r0 = ts.io.writes.Load(), ts.io.reads.Load()
		}
		var b []byte
		if prevResp != 0 {
			b, _ = packets.AppendPacket(b, &packets.Puback{PacketID: prevResp}, r.v)
		}
		req := &packets.Publish{QoS: 1, PacketID: uint16(i + 1), Topic: "req/get", Payload: []byte{byte(i)}}
		req.Properties.Present.Add(packets.PropResponseTopic)
		req.Properties.ResponseTopic = "resp/rr"
		b, err := packets.AppendPacket(b, req, r.v)
		if err != nil {
			t.Fatal(err)
		}
		r.sendBytes(b)
		pub := r.expectPublish()
		if pub.Topic != "resp/rr" || len(pub.Payload) != 1 || pub.Payload[0] != byte(i) {
			t.Fatalf("request %d: response %q %v", i, pub.Topic, pub.Payload)
		}
		prevResp = pub.PacketID
		p := r.recv()
		if a, ok := p.(*packets.Puback); !ok || a.PacketID != uint16(i+1) {
			t.Fatalf("request %d: want PUBACK %d after the response, got %T %+v", i, i+1, p, p)
		}
	}
	writes, reads := ts.io.writes.Load()-w0, ts.io.reads.Load()-r0
	t.Logf("%d requests: %d writes, %d reads (%.2f, %.2f per request)", n, writes, reads,
		float64(writes)/n, float64(reads)/n)
	// One each per request; a little slack for a scheduler-split read.
	if writes > n+n/10 {
		t.Errorf("%d writes for %d requests, want about one per request", writes, n)
	}
	if reads > n+n/10 {
		t.Errorf("%d reads for %d requests, want about one per request", reads, n)
	}
}

// TestMQTTCoalesceFanout: a publisher's burst of messages reaches each
// subscriber in about one write, not one write per delivery, in order.
func TestMQTTCoalesceFanout(t *testing.T) {
	ts := startServer(t, nil)
	const subs, msgs = 20, 50
	rs := make([]*rawClient, subs)
	for i := range rs {
		rs[i] = connected(t, ts.addr, packets.Version311, "fan-sub-"+string(rune('a'+i)))
		rs[i].subscribe(1, sub("fan/#", 0))
	}
	pub := connected(t, ts.addr, packets.Version311, "fan-pub")
	var b []byte
	for i := range msgs {
		var pl [4]byte
		binary.BigEndian.PutUint32(pl[:], uint32(i))
		b, _ = packets.AppendPacket(b, &packets.Publish{Topic: "fan/x", Payload: pl[:]}, pub.v)
	}
	w0 := ts.io.writes.Load()
	pub.sendBytes(b)
	var wg sync.WaitGroup
	errs := make(chan string, subs)
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range msgs {
				p, err := r.next(5 * time.Second)
				if err != nil {
					errs <- err.Error()
					return
				}
				pp, ok := p.(*packets.Publish)
				if !ok || binary.BigEndian.Uint32(pp.Payload) != uint32(i) {
					errs <- "out of order or not a PUBLISH"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	writes := ts.io.writes.Load() - w0
	t.Logf("%d deliveries in %d writes", subs*msgs, writes)
	// The burst is one read and one unit of work (msgs < batchPackets)
	// unless the kernel split it; allow a few splits.
	if writes > 3*subs {
		t.Errorf("%d writes for %d deliveries to %d subscribers, want about one per subscriber", writes, subs*msgs, subs)
	}
}

// TestMQTTCoalesceHoldLimit: held output is written once it would pass
// holdMax (MaxOutbound/4 here), so a large burst neither waits for the end
// of the unit nor counts as a backed-up client.
func TestMQTTCoalesceHoldLimit(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxOutbound = 64 << 10 })
	if ts.holdMax != 16<<10 {
		t.Fatalf("holdMax %d, want 16 KiB", ts.holdMax)
	}
	s := connected(t, ts.addr, packets.Version311, "hold-sub")
	s.subscribe(1, sub("hold/#", 0))
	pub := connected(t, ts.addr, packets.Version311, "hold-pub")
	const msgs = 60 // 60 KiB: 4 flushes at 16 KiB
	payload := make([]byte, 1<<10)
	var b []byte
	for i := range msgs {
		binary.BigEndian.PutUint32(payload, uint32(i))
		b, _ = packets.AppendPacket(b, &packets.Publish{Topic: "hold/x", Payload: payload}, pub.v)
	}
	w0 := ts.io.writes.Load()
	pub.sendBytes(b)
	for i := range msgs {
		pp := s.expectPublish()
		if got := binary.BigEndian.Uint32(pp.Payload); got != uint32(i) {
			t.Fatalf("message %d: got %d", i, got)
		}
	}
	writes := ts.io.writes.Load() - w0
	if writes < 3 || writes > msgs/2 {
		t.Errorf("%d writes for %d KiB held at most 16 KiB at a time, want a few", writes, msgs)
	}
	if n := ts.stats.DroppedQoS0.Load() + ts.stats.SlowReaders.Load(); n != 0 {
		t.Errorf("held output counted as backlog: %d drops or slow readers", n)
	}
}

// TestMQTTShortReadEOF: a client that sends its last packet and closes at
// once (data and FIN in one wake-up) is seen closed: the short read that
// drains the data must not hide the end of stream (a missed wake-up would
// leave the connection open until its keep alive).
func TestMQTTShortReadEOF(t *testing.T) {
	ts := startServer(t, nil)
	ping, _ := packets.AppendPacket(nil, &packets.Pingreq{}, packets.Version311)
	for i := range 50 {
		r := connected(t, ts.addr, packets.Version311, "eof")
		switch i % 3 {
		case 0: // data and FIN back to back
			r.sendBytes(ping)
			r.nc.Close()
		case 1: // data, then FIN after the server has read it
			r.sendBytes(ping)
			if _, ok := r.recv().(*packets.Pingresp); !ok {
				t.Fatal("want PINGRESP")
			}
			r.nc.Close()
		case 2: // half close after data: the server still answers
			r.sendBytes(ping)
			r.nc.(*net.TCPConn).CloseWrite()
		}
		testutil.WaitFor(t, 5*time.Second, "the server to see the close", func() bool { return ts.stats.Connections.Load() == 0 })
	}
}

// TestMQTTCoalesceNotBehindHandler: output a unit of work holds (a PUBACK
// and a subscriber's message from earlier packets of the same read) leaves
// before a handler that blocks runs, not after it.
func TestMQTTCoalesceNotBehindHandler(t *testing.T) {
	ts := startServer(t, nil)
	unblock := make(chan struct{})
	ts.Handle("slow/req", func(ctx context.Context, from ClientInfo, msg *Message) error {
		<-unblock
		return nil
	})
	s := connected(t, ts.addr, packets.Version311, "nb-sub")
	s.subscribe(1, sub("nb/#", 0))
	pub := connected(t, ts.addr, packets.Version311, "nb-pub")
	b, _ := packets.AppendPacket(nil, &packets.Publish{QoS: 1, PacketID: 1, Topic: "nb/x", Payload: []byte("m")}, pub.v)
	b, _ = packets.AppendPacket(b, &packets.Publish{QoS: 1, PacketID: 2, Topic: "slow/req", Payload: []byte("r")}, pub.v)
	pub.sendBytes(b)
	defer close(unblock)
	if p, err := s.next(2 * time.Second); err != nil {
		t.Fatalf("subscriber: message held behind the blocked handler: %v", err)
	} else if pp, ok := p.(*packets.Publish); !ok || string(pp.Payload) != "m" {
		t.Fatalf("subscriber: got %T %+v", p, p)
	}
	if p, err := pub.next(2 * time.Second); err != nil {
		t.Fatalf("publisher: PUBACK held behind the blocked handler: %v", err)
	} else if a, ok := p.(*packets.Puback); !ok || a.PacketID != 1 {
		t.Fatalf("publisher: got %T %+v", p, p)
	}
}

// TestMQTTCoalesceAsyncAckNotHeld: an AsyncBackend completion from the
// backend's goroutine writes its PUBACK at once, even while the
// connection's worker holds the connection's output (here: blocked in a
// handler for a later packet of the same read).
func TestMQTTCoalesceAsyncAckNotHeld(t *testing.T) {
	hb := &heldBackend{MemoryBackend: NewMemoryBackend()}
	opts := DefaultOptions()
	opts.Listen = []string{"127.0.0.1:0"}
	s, err := NewServer(opts, hb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	started, got := make(chan struct{}), make(chan struct{})
	timedOut := make(chan bool, 1)
	s.Handle("blk/req", func(ctx context.Context, from ClientInfo, msg *Message) error {
		close(started)
		select {
		case <-got:
			timedOut <- false
		case <-time.After(30 * time.Second): // past r.recv's bound: a held PUBACK 1 fails there
			timedOut <- true
		}
		return nil
	})
	r := connected(t, s.Addrs()[0].String(), packets.Version311, "async-ack")
	b, _ := packets.AppendPacket(nil, &packets.Publish{QoS: 1, PacketID: 1, Topic: "a/x", Payload: []byte("1")}, r.v)
	b, _ = packets.AppendPacket(b, &packets.Publish{QoS: 1, PacketID: 2, Topic: "blk/req", Payload: []byte("2")}, r.v)
	r.sendBytes(b)
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("handler not called")
	}
	if hb.count() != 1 {
		t.Fatalf("%d publishes held, want 1", hb.count())
	}
	hb.release([]int{0}, nil) // from this goroutine, while the handler blocks
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != 1 {
		t.Fatalf("want PUBACK 1, got %T %+v", a, a)
	}
	close(got)
	if <-timedOut {
		t.Fatal("PUBACK 1 was held until the handler returned")
	}
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != 2 {
		t.Fatalf("want PUBACK 2, got %T %+v", a, a)
	}
}
