package mqtt

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// onPoller reports whether the caller runs inside the poller's own
// handling of a read (workInline), not on a worker.
func onPoller() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*conn).workInline") {
			return true
		}
		if !more {
			return false
		}
	}
}

// inlineServer starts a server with an inline handler on "ireq" that
// answers every request at once (echoing its payload to the response
// topic) unless its payload starts with 'L': those call later and are
// handed to the test on pending. Each call records whether it ran on the
// poller.
func inlineServer(t *testing.T, pending chan<- asyncReq, mod ...func(*Options)) (*Server, func() []bool) {
	t.Helper()
	var m func(*Options)
	if len(mod) > 0 {
		m = mod[0]
	}
	s := startServer(t, m).Server
	var mu sync.Mutex
	var where []bool
	s.HandleInline("ireq", func(_ context.Context, from ClientInfo, msg *Message, later func() func(error)) error {
		mu.Lock()
		where = append(where, onPoller())
		mu.Unlock()
		if len(msg.Payload) > 0 && msg.Payload[0] == 'L' {
			pending <- asyncReq{from, nil, later()} // msg is the call's only
			return nil
		}
		if msg.ResponseTopic != "" {
			// Copies: the request's bytes are the call's only.
			resp := &Message{Topic: strings.Clone(msg.ResponseTopic), Payload: bytes.Clone(msg.Payload), QoS: 1}
			if err := s.SendTo(from.ClientID, resp); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	return s, func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), where...)
	}
}

func inlineRequest(id uint16, qos byte, payload string) *packets.Publish {
	p := &packets.Publish{QoS: qos, PacketID: id, Topic: "ireq", Payload: []byte(payload)}
	p.Properties.Present.Add(packets.PropResponseTopic)
	p.Properties.ResponseTopic = "iresp"
	return p
}

// TestMQTTHandleInline: a v5 client's QoS 1 request to an inline
// handler's topic is handled on the poller, and its response and PUBACK
// arrive as with HandleAsync; a request the handler defers (later) keeps
// its PUBACK's place in PUBLISH order while later requests are answered
// on the poller meanwhile. A 3.1.1 client's request, a QoS 2 one and one
// with a topic alias reach the same handler on a worker.
func TestMQTTHandleInline(t *testing.T) {
	pending := make(chan asyncReq, 4)
	s, where := inlineServer(t, pending)
	addr := s.Addrs()[0].String()

	r := connected(t, addr, packets.Version5, "inline-v5")
	// The worker that handled CONNECT may still own the connection when
	// the first request arrives (it then handles it): requests go one at
	// a time until one is handled on the poller, as all are from then on.
	n := 0
	for id := uint16(1); ; id++ {
		r.send(inlineRequest(id, 1, "a"))
		if pub := r.expectPublish(); string(pub.Payload) != "a" {
			t.Fatalf("response %q", pub.Payload)
		}
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != id || a.ReasonCode != 0 {
			t.Fatalf("want PUBACK %d, got %+v", id, a)
		}
		n++
		if w := where(); len(w) != n {
			t.Fatalf("%d requests reached the handler, want %d", len(w), n)
		} else if w[n-1] {
			break
		}
		if id == 20 {
			t.Fatalf("none of 20 requests handled on the poller: %v", where())
		}
	}

	// A deferred request, then one answered at once: the second's
	// response comes first, its PUBACK after the first's.
	r.send(inlineRequest(2, 1, "L"))
	var q asyncReq
	select {
	case q = <-pending:
	case <-time.After(10 * time.Second):
		t.Fatal("deferred request never reached the handler")
	}
	r.send(inlineRequest(3, 1, "b"))
	if pub := r.expectPublish(); string(pub.Payload) != "b" {
		t.Fatalf("response %q, want request 3's", pub.Payload)
	}
	r.nothing(50 * time.Millisecond) // PUBACK 3 waits for PUBACK 2
	go q.done(ErrNotAuthorized)
	for id, want := range []packets.ReasonCode{packets.ReasonNotAuthorized, 0} {
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != uint16(id+2) || a.ReasonCode != want {
			t.Fatalf("want PUBACK %d reason %v, got %+v", id+2, want, a)
		}
	}
	if w := where(); len(w) != n+2 || !w[n] || !w[n+1] {
		t.Fatalf("requests handled on the poller: %v, want the last two", w)
	}

	// QoS 2, then a topic alias: on a worker.
	r.send(inlineRequest(4, 2, "c"))
	if pub := r.expectPublish(); string(pub.Payload) != "c" {
		t.Fatalf("response %q", pub.Payload)
	}
	if a, ok := r.recv().(*packets.Pubrec); !ok || a.PacketID != 4 {
		t.Fatalf("want PUBREC 4, got %+v", a)
	}
	aliased := inlineRequest(5, 1, "d")
	aliased.Properties.Present.Add(packets.PropTopicAlias)
	aliased.Properties.TopicAlias = 1
	r.send(aliased)
	if pub := r.expectPublish(); string(pub.Payload) != "d" {
		t.Fatalf("response %q", pub.Payload)
	}
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != 5 {
		t.Fatalf("want PUBACK 5, got %+v", a)
	}
	if w := where(); len(w) != n+4 || w[n+2] || w[n+3] {
		t.Fatalf("QoS 2 and aliased requests on the poller: %v, want workers", w)
	}

	// 3.1.1: on a worker.
	r3 := connected(t, addr, packets.Version311, "inline-v3")
	if a := r3.publish1(1, "ireq", "e"); a.PacketID != 1 {
		t.Fatalf("PUBACK %+v", a)
	}
	testutil.WaitFor(t, 10*time.Second, "the 3.1.1 request handled", func() bool { return len(where()) == n+5 })
	if w := where(); w[n+4] {
		t.Fatalf("3.1.1 request on the poller: %v", w)
	}
}

// TestMQTTHandleInlineReceiveMaximum: requests an inline handler defers
// count against the receive maximum as on a worker: once ReceiveMaximum
// of them wait, the connection reads nothing more (the next request
// reaches the handler only when one completes).
func TestMQTTHandleInlineReceiveMaximum(t *testing.T) {
	const recvMax = 4
	pending := make(chan asyncReq, recvMax+1)
	s := startServer(t, func(o *Options) { o.ReceiveMaximum = recvMax }).Server
	s.HandleInline("ireq", func(_ context.Context, from ClientInfo, msg *Message, later func() func(error)) error {
		pending <- asyncReq{from, nil, later()} // msg is the call's only
		return nil
	})
	r := connected(t, s.Addrs()[0].String(), packets.Version5, "inline-rm")
	// The client breaks the protocol (one more than the receive
	// maximum): the server must still not read past it.
	for id := uint16(1); id <= recvMax+1; id++ {
		r.send(inlineRequest(id, 1, "L"))
	}
	var reqs []asyncReq
	for len(reqs) < recvMax {
		select {
		case q := <-pending:
			reqs = append(reqs, q)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d requests reached the handler", len(reqs), recvMax)
		}
	}
	select {
	case <-pending:
		t.Fatalf("request %d reached the handler while %d were pending", len(reqs)+1, len(reqs))
	case <-time.After(100 * time.Millisecond):
	}
	reqs[0].done(nil)
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != 1 {
		t.Fatalf("want PUBACK 1, got %+v", a)
	}
	select {
	case q := <-pending:
		q.done(nil)
	case <-time.After(10 * time.Second):
		t.Fatal("the last request never reached the handler after one completed")
	}
	for _, q := range reqs[1:] {
		q.done(nil)
	}
	for id := uint16(2); id <= recvMax+1; id++ {
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != id {
			t.Fatalf("want PUBACK %d, got %+v", id, a)
		}
	}
}

// TestMQTTHandleInlineBurstYields: a read holding more than batchPackets
// requests is handled on the poller for its first batchPackets only; a
// worker handles the rest (the poller serves its other connections
// meanwhile), and every response and PUBACK still arrives in request
// order.
func TestMQTTHandleInlineBurstYields(t *testing.T) {
	s, where := inlineServer(t, nil)
	r := connected(t, s.Addrs()[0].String(), packets.Version5, "inline-burst")
	const n = 3 * batchPackets
	var b []byte
	for id := uint16(1); id <= n; id++ {
		var err error
		if b, err = packets.AppendPacket(b, inlineRequest(id, 1, string(rune('a'+id%26))), r.v); err != nil {
			t.Fatal(err)
		}
	}
	r0 := s.io.reads.Load()
	r.sendBytes(b)
	var acks []uint16
	for len(acks) < n {
		switch p := r.recv().(type) {
		case *packets.Publish:
			if want := string(rune('a' + (len(acks)+1)%26)); string(p.Payload) != want {
				t.Fatalf("response %d carries %q, want %q", len(acks)+1, p.Payload, want)
			}
			r.send(&packets.Puback{PacketID: p.PacketID})
		case *packets.Puback:
			acks = append(acks, p.PacketID)
			if p.PacketID != uint16(len(acks)) {
				t.Fatalf("PUBACK %d arrived as the %dth", p.PacketID, len(acks))
			}
		default:
			t.Fatalf("unexpected %T", p)
		}
	}
	ran := where()
	if len(ran) != n {
		t.Fatalf("the handler ran %d times, want %d", len(ran), n)
	}
	polled := 0
	for _, p := range ran {
		if p {
			polled++
		}
	}
	// The burst (about 4 KiB, one write) reaches the socket as one
	// loopback segment, so one read holds it all.
	if polled == n {
		t.Fatalf("all %d requests of the burst ran on the poller (%d reads)", n, s.io.reads.Load()-r0)
	}
	if !ran[0] {
		t.Fatal("the first request of the burst did not run on the poller")
	}
}

// TestMQTTHandleInlineAliased: an inline handler on the poller gets its
// request decoded in place (no copy), every field as the client sent it,
// and what it copies stays valid after the call; under the race detector
// the request's bytes are overwritten when the handler returns, so what a
// handler kept without copying (against HandleInline's contract) reads
// as poison, which is what makes the project's -race tests catch it. The
// handler looks at what it kept of the previous request in its next call
// (after the poller's overwrite, on the goroutine that owns the
// connection).
func TestMQTTHandleInlineAliased(t *testing.T) {
	type seen struct {
		onPoller             bool
		payload, corr, topic string // copies
		user                 []UserProperty
		prevPolled           bool   // the previous request ran on the poller
		prevKept             string // what its payload, kept uncopied, reads now
		prevTopic            string // what its response topic, kept uncopied, reads now
	}
	calls := make(chan seen, 64)
	s := startServer(t, nil).Server
	var kept []byte // the previous request's payload, kept against the contract
	var keptTopic string
	var keptPolled bool
	s.HandleInline("ireq", func(_ context.Context, from ClientInfo, msg *Message, later func() func(error)) error {
		sn := seen{onPoller: onPoller(), payload: string(msg.Payload), corr: string(msg.CorrelationData),
			topic: strings.Clone(msg.ResponseTopic), prevPolled: keptPolled, prevKept: string(kept), prevTopic: strings.Clone(keptTopic)}
		for _, u := range msg.User {
			sn.user = append(sn.user, UserProperty{Key: strings.Clone(u.Key), Value: strings.Clone(u.Value)})
		}
		kept, keptTopic, keptPolled = msg.Payload, msg.ResponseTopic, sn.onPoller
		if err := s.SendTo(from.ClientID, &Message{Topic: sn.topic, Payload: []byte(sn.payload), QoS: 1,
			CorrelationData: []byte(sn.corr)}); err != nil {
			t.Error(err)
		}
		calls <- sn
		return nil
	})
	r := connected(t, s.Addrs()[0].String(), packets.Version5, "inline-alias")
	checked := false
	for id := uint16(1); id <= 20 && !checked; id++ {
		payload := fmt.Sprintf("request %d", id)
		req := inlineRequest(id, 1, payload)
		req.Properties.Present.Add(packets.PropCorrelationData)
		req.Properties.CorrelationData = []byte(fmt.Sprintf("corr-%d", id))
		req.Properties.ResponseTopic = fmt.Sprintf("iresp/%d", id)
		req.Properties.User = []UserProperty{{Key: "k", Value: fmt.Sprint("v", id)}, {Key: "k2", Value: "w"}}
		r.send(req)
		pub := r.expectPublish()
		if string(pub.Payload) != payload || string(pub.Properties.CorrelationData) != fmt.Sprintf("corr-%d", id) || pub.Topic != fmt.Sprintf("iresp/%d", id) {
			t.Fatalf("response %q %q on %q", pub.Payload, pub.Properties.CorrelationData, pub.Topic)
		}
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != id {
			t.Fatalf("want PUBACK %d, got %+v", id, a)
		}
		sn := <-calls
		if sn.payload != payload || sn.topic != fmt.Sprintf("iresp/%d", id) || len(sn.user) != 2 || sn.user[0].Value != fmt.Sprint("v", id) || sn.user[1] != (UserProperty{Key: "k2", Value: "w"}) {
			t.Fatalf("handler saw %+v", sn)
		}
		if !sn.prevPolled {
			continue // the worker that handled CONNECT still owned the connection
		}
		checked = true
		if !poisonInline {
			continue
		}
		// Poisoned, or already holding the next read's bytes: either
		// way no longer the request.
		if sn.prevKept == fmt.Sprintf("request %d", id-1) {
			t.Fatalf("payload kept past the call still reads %q", sn.prevKept)
		}
		if sn.prevTopic == fmt.Sprintf("iresp/%d", id-1) {
			t.Fatalf("response topic kept past the call still reads %q", sn.prevTopic)
		}
	}
	if !checked {
		t.Fatal("no request handled on the poller")
	}
}

// TestMQTTHandlerReplaced: the server remembers the handler of the last
// exact topic it looked up; a handler unregistered and replaced on the
// same topic is not called again, and with none left the topic's
// PUBLISHes reach its subscribers.
func TestMQTTHandlerReplaced(t *testing.T) {
	s := startServer(t, nil).Server
	addr := s.Addrs()[0].String()
	answer := func(tag string) AsyncHandler {
		return func(_ context.Context, from ClientInfo, msg *Message, _ func() func(error)) error {
			resp := &Message{Topic: strings.Clone(msg.ResponseTopic), Payload: []byte(tag), QoS: 1}
			return s.SendTo(from.ClientID, resp)
		}
	}
	r := connected(t, addr, packets.Version5, "replaced")
	request := func(id uint16, want string) {
		t.Helper()
		r.send(inlineRequest(id, 1, "x"))
		if pub := r.expectPublish(); string(pub.Payload) != want {
			t.Fatalf("request %d answered %q, want %q", id, pub.Payload, want)
		}
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != id {
			t.Fatalf("want PUBACK %d, got %+v", id, a)
		}
	}
	unA := s.HandleInline("ireq", answer("A"))
	for id := uint16(1); id <= 3; id++ {
		request(id, "A")
	}
	unA()
	unB := s.HandleInline("ireq", answer("B"))
	for id := uint16(4); id <= 6; id++ {
		request(id, "B")
	}
	unB()
	sub := connected(t, addr, packets.Version5, "replaced-sub")
	sub.subscribe(1, packets.Subscription{Filter: "ireq", QoS: 1})
	r.send(inlineRequest(7, 1, "plain"))
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != 7 {
		t.Fatalf("want PUBACK 7, got %+v", a)
	}
	if pub := sub.expectPublish(); string(pub.Payload) != "plain" {
		t.Fatalf("subscriber got %q", pub.Payload)
	}
}
