package mqtt

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// pollerRequests makes requests (ids from 1) until one is handled on the
// poller, which raises the connection's SO_RCVLOWAT mark (the worker that
// handled CONNECT may still own the connection for the first ones); each
// response is acknowledged with the next request. It returns the next
// free request id and the last response's packet id, not yet
// acknowledged.
func pollerRequests(t *testing.T, r *rawClient, where func() []bool) (next, unacked uint16) {
	t.Helper()
	for id := uint16(1); ; id++ {
		r.send(inlineRequest(id, 1, "a"))
		pub := r.expectPublish()
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != id {
			t.Fatalf("want PUBACK %d, got %+v", id, a)
		}
		if w := where(); w[len(w)-1] {
			return id + 1, pub.PacketID
		}
		r.send(&packets.Puback{PacketID: pub.PacketID})
		if id == 20 {
			t.Fatalf("none of 20 requests handled on the poller: %v", where())
		}
	}
}

// inflightOut is the number of messages to clientID awaiting the client's
// acknowledgement.
func inflightOut(s *Server, clientID string) int {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.inflight)
}

// TestMQTTInlineAckWaitsForRequest: once a request/response client's
// request was handled on the poller, its lone PUBACK of the response is
// not read (no read(2), so no wake-up of the poller) while the mark is
// up; the client's next request brings it along in one read, and the
// server then holds only the new response in flight. (If the sweep
// lowered the mark because the machine stalled for lowatIdle, the round
// is repeated.)
func TestMQTTInlineAckWaitsForRequest(t *testing.T) {
	s, where := inlineServer(t, nil)
	const id = "lowat-ack"
	r := connected(t, s.Addrs()[0].String(), packets.Version5, id)
	next, unacked := pollerRequests(t, r, where)
	for attempt := 0; ; attempt++ {
		reads, lowered := s.io.reads.Load(), s.io.lowered.Load()
		r.send(&packets.Puback{PacketID: unacked})
		deadline := time.Now().Add(30 * time.Millisecond)
		for time.Now().Before(deadline) && s.io.reads.Load() == reads {
			time.Sleep(time.Millisecond)
		}
		if got := s.io.reads.Load(); got != reads {
			if s.io.lowered.Load() != lowered && attempt < 5 {
				// The sweep lowered the mark: raise it again.
				next, unacked = pollerRequests(t, r, where)
				continue
			}
			t.Fatalf("a lone PUBACK was read (%d reads) while the mark was up", got-reads)
		}
		if n := inflightOut(s, id); n != 1 {
			t.Fatalf("%d messages in flight before the next request, want the unacknowledged response", n)
		}
		r.send(inlineRequest(next, 1, "b"))
		pub := r.expectPublish()
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != next {
			t.Fatalf("want PUBACK %d, got %+v", next, a)
		}
		if got := s.io.reads.Load() - reads; got != 1 && s.io.lowered.Load() == lowered {
			t.Fatalf("the PUBACK and the next request took %d reads, want 1", got)
		}
		if n := inflightOut(s, id); n != 1 || pub.PacketID == unacked {
			t.Fatalf("%d messages in flight after the next request, want only its response", n)
		}
		return
	}
}

// TestMQTTInlineLoneSmallPacketsRead: what stays under a raised mark with
// nothing after it is still read: a lone PINGREQ after the client's last
// PUBACK gets its PINGRESP (the sweep lowers the mark of a connection
// that read nothing for lowatIdle), and the client's next request raises
// the mark again.
func TestMQTTInlineLoneSmallPacketsRead(t *testing.T) {
	s, where := inlineServer(t, nil)
	const id = "lowat-ping"
	r := connected(t, s.Addrs()[0].String(), packets.Version5, id)
	next, unacked := pollerRequests(t, r, where)
	lowered := s.io.lowered.Load()
	r.send(&packets.Puback{PacketID: unacked})
	r.send(&packets.Pingreq{})
	if p, err := r.next(10 * time.Second); err != nil {
		t.Fatalf("no PINGRESP: %v", err)
	} else if _, ok := p.(*packets.Pingresp); !ok {
		t.Fatalf("want PINGRESP, got %T", p)
	}
	if s.io.lowered.Load() == lowered {
		t.Fatal("PINGRESP came while the mark was up")
	}
	testutil.WaitFor(t, 10*time.Second, "the PUBACK read", func() bool { return inflightOut(s, id) == 0 })
	// Raised again by the next request handled on the poller.
	r.send(inlineRequest(next, 1, "c"))
	r.expectPublish()
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != next {
		t.Fatalf("want PUBACK %d, got %+v", next, a)
	}
	if w := where(); !w[len(w)-1] {
		t.Fatal("the request after the PINGREQ ran on a worker")
	}
	c := connOf(s, id)
	c.outMu.Lock()
	up := c.lowat
	c.outMu.Unlock()
	if !up {
		t.Fatal("the mark was not raised again by the next request")
	}
}

// TestMQTTInlineAckQuotaLowersMark: a client with receive maximum 1 whose
// response's PUBACK waits under the mark gets a message published to it
// meanwhile: the session queues it for lack of quota, which lowers the
// mark at once (the test stops the sweep), the PUBACK is read and the
// message delivered.
func TestMQTTInlineAckQuotaLowersMark(t *testing.T) {
	s, where := inlineServer(t, nil)
	const id = "lowat-quota"
	r := dialRaw(t, s.Addrs()[0].String(), packets.Version5)
	cp := &packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropReceiveMaximum)
	cp.Properties.ReceiveMaximum = 1
	if ack := r.connect(cp); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	if sa := r.subscribe(100, sub("news", 1)); sa.ReasonCodes[0] != 1 {
		t.Fatalf("SUBACK %v", sa.ReasonCodes)
	}
	_, unacked := pollerRequests(t, r, where)
	// No sweep from here: only the quota can lower the mark.
	stopLowatSweep(s)
	lowered := s.io.lowered.Load()
	r.send(&packets.Puback{PacketID: unacked})
	p := connected(t, s.Addrs()[0].String(), packets.Version5, "lowat-quota-pub")
	if a := p.publish1(1, "news", "n"); a.ReasonCode != 0 {
		t.Fatalf("PUBACK %v", a.ReasonCode)
	}
	pub := r.expectPublish()
	if string(pub.Payload) != "n" {
		t.Fatalf("delivered %q", pub.Payload)
	}
	if s.io.lowered.Load() == lowered {
		t.Fatal("delivered without the mark lowered")
	}
}

// connOf is the connection of clientID's session.
func connOf(s *Server, clientID string) *conn {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.conn
}

// TestMQTTInlineSplitRequestLowersMark: a request whose last bytes come
// in a segment of their own, shorter than the raised mark (a request
// split by the network), is answered without the sweep (the test stops
// it): input that ends inside a packet lowers the mark.
func TestMQTTInlineSplitRequestLowersMark(t *testing.T) {
	s, where := inlineServer(t, nil)
	const id = "lowat-split"
	r := connected(t, s.Addrs()[0].String(), packets.Version5, id)
	next, unacked := pollerRequests(t, r, where)
	stopLowatSweep(s)
	b, err := packets.AppendPacket(nil, &packets.Puback{PacketID: unacked}, packets.Version5)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = packets.AppendPacket(b, inlineRequest(next, 1, "split request payload"), packets.Version5); err != nil {
		t.Fatal(err)
	}
	const tail = 10 // fewer than lowatBytes
	reads, lowered := s.io.reads.Load(), s.io.lowered.Load()
	r.sendBytes(b[:len(b)-tail])
	testutil.WaitFor(t, 10*time.Second, "the request's first bytes read", func() bool { return s.io.reads.Load() != reads })
	r.sendBytes(b[len(b)-tail:])
	if pub := r.expectPublish(); string(pub.Payload) == "" {
		t.Fatal("empty response")
	}
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != next {
		t.Fatalf("want PUBACK %d, got %+v", next, a)
	}
	if s.io.lowered.Load() == lowered {
		t.Fatal("answered without the mark lowered")
	}
}

// stopLowatSweep disarms every poller's sweep for the rest of the test:
// only the mechanism under test may lower a mark.
func stopLowatSweep(s *Server) {
	for _, pl := range s.pollers {
		pl.lowMu.Lock()
		s.wheel.disarm(&pl.lowTimer)
		pl.lowArmed = true
		pl.lowMu.Unlock()
	}
}

// TestMQTTInlineQuietAcksKeepMark: a request/response client that goes
// quiet with only its last response's PUBACK unread keeps its mark (no
// setsockopt, no read) until it has read nothing for lowatRest; then the
// sweep lowers it and the PUBACK is read. The sweep looks at what waits
// once in the quiet spell, not at every tick.
func TestMQTTInlineQuietAcksKeepMark(t *testing.T) {
	s, where := inlineServer(t, nil)
	const id = "lowat-quiet"
	r := connected(t, s.Addrs()[0].String(), packets.Version5, id)
	_, unacked := pollerRequests(t, r, where)
	c := connOf(s, id)
	// The quiet spell starts at the last request's read; a look before
	// this point is the spell's one look.
	last, kept, lowered := c.lastRecv.Load(), s.io.lowKept.Load(), s.io.lowered.Load()
	r.send(&packets.Puback{PacketID: unacked})
	testutil.WaitFor(t, 10*time.Second, "the mark lowered", func() bool { return s.io.lowered.Load() != lowered })
	if quiet := nanotime() - last; quiet < int64(lowatRest) {
		t.Fatalf("a lone PUBACK had the mark lowered %v into the quiet spell, before lowatRest", time.Duration(quiet))
	}
	if s.io.lowKept.Load() == kept {
		t.Fatal("the mark came down without a look that kept it")
	}
	testutil.WaitFor(t, 10*time.Second, "the PUBACK read", func() bool { return inflightOut(s, id) == 0 })
}

// TestMQTTInlineLateSmallPacketRead: a small packet that reaches the
// socket after the sweep has looked and kept the mark (only a PUBACK
// waited) is seen at a later look, not left until lowatRest. The rest is
// raised to an hour, so only a look can lower the mark here.
func TestMQTTInlineLateSmallPacketRead(t *testing.T) {
	s, where := inlineServer(t, nil)
	s.io.restNanos.Store(int64(time.Hour))
	const id = "lowat-late"
	r := connected(t, s.Addrs()[0].String(), packets.Version5, id)
	_, unacked := pollerRequests(t, r, where)
	kept, seen := s.io.lowKept.Load(), s.io.lowSeen.Load()
	r.send(&packets.Puback{PacketID: unacked})
	testutil.WaitFor(t, 30*time.Second, "a look that keeps the mark", func() bool { return s.io.lowKept.Load() != kept })
	r.send(&packets.Pingreq{})
	if p, err := r.next(30 * time.Second); err != nil {
		t.Fatalf("no PINGRESP: %v", err)
	} else if _, ok := p.(*packets.Pingresp); !ok {
		t.Fatalf("want PINGRESP, got %T", p)
	}
	if s.io.lowSeen.Load() == seen {
		t.Fatal("PINGRESP came without a look that saw the PINGREQ")
	}
}

// TestMQTTOnlyPubacks pins what the sweep takes for acknowledgements
// alone: whole PUBACKs (MQTT 3.1.1 and 5, with a reason code or
// properties), nothing else, nothing partial.
func TestMQTTOnlyPubacks(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want bool
	}{
		{[]byte{0x40, 2, 0, 1}, true},
		{[]byte{0x40, 3, 0, 1, 0x10}, true},
		{[]byte{0x40, 2, 0, 1, 0x40, 3, 0, 2, 0, 0x40, 4, 0, 3, 0x80, 0}, true},
		{nil, false},
		{[]byte{0x40}, false},
		{[]byte{0x40, 2, 0}, false},
		{[]byte{0x40, 2, 0, 1, 0xC0, 0}, false},                // a PINGREQ after it
		{[]byte{0xE0, 0}, false},                               // DISCONNECT
		{[]byte{0x50, 2, 0, 1}, false},                         // PUBREC
		{[]byte{0x41, 2, 0, 1}, false},                         // bad flags
		{[]byte{0x40, 1, 0}, false},                            // too short for an id
		{[]byte{0x40, 0x80, 0x01, 0, 1}, false},                // multi-byte length
		{[]byte{0x30, 5, 0, 1, 'a', 'x', 'y'}, false},          // a short PUBLISH
		{append([]byte{0x40, 30}, make([]byte, 30)...), false}, // as long as the mark
	} {
		if got := onlyPubacks(c.b); got != c.want {
			t.Errorf("onlyPubacks(% x) = %v, want %v", c.b, got, c.want)
		}
	}
}

// FuzzOnlyPubacks: whatever onlyPubacks takes for acknowledgements alone
// is framed by the packet decoder as whole PUBACKs (type 4, flags 0, room
// for a packet id) that end exactly where b ends.
func FuzzOnlyPubacks(f *testing.F) {
	f.Add([]byte{0x40, 2, 0, 1})
	f.Add([]byte{0x40, 3, 0, 1, 0x10, 0x40, 2, 0, 2})
	f.Add([]byte{0x40, 2, 0, 1, 0xC0, 0})
	f.Add([]byte{0x40, 0x80, 0x01, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if !onlyPubacks(b) {
			return
		}
		for rest := b; len(rest) > 0; {
			typ, flags, n, hl, err := packets.DecodeFixedHeader(rest)
			if err != nil || typ != int(packets.TypePuback) || flags != 0 || n < 2 || hl+n > len(rest) {
				t.Fatalf("% x: fixed header type %d flags %d length %d (header %d): %v", b, typ, flags, n, hl, err)
			}
			rest = rest[hl+n:]
		}
	})
}
