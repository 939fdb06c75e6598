package mqtt

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// poisonRecycler counts the messages given back by SendToRecycled and
// overwrites each, bytes included, the way a pool reusing them would:
// whatever the server still sends of a recycled message reads "XXXX".
type poisonRecycler struct {
	mu   sync.Mutex
	got  []*Message
	bufs map[*Message][]byte
}

// message builds a message whose topic and payload live in one buffer
// the recycler overwrites.
func (pr *poisonRecycler) message(topic, payload string) *Message {
	b := []byte(topic + payload)
	m := &Message{Topic: unsafe.String(&b[0], len(topic)), Payload: b[len(topic):], QoS: 1,
		CorrelationData: b[len(topic):]}
	pr.mu.Lock()
	if pr.bufs == nil {
		pr.bufs = map[*Message][]byte{}
	}
	pr.bufs[m] = b
	pr.mu.Unlock()
	return m
}

func (pr *poisonRecycler) Recycle(m *Message) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.got = append(pr.got, m)
	for i := range pr.bufs[m] {
		pr.bufs[m][i] = 'X'
	}
	m.QoS, m.Expiry = 0, time.Unix(1, 0) // expired: not sent again
}

func (pr *poisonRecycler) count() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.got)
}

// TestSendToRecycledAfterAck: a message given to SendToRecycled goes back
// to its Recycler once, only after the client's PUBACK, including one
// that waited in the session's queue for the client's receive quota; the
// topic alias the server chose for it outlives the message's bytes.
func TestSendToRecycledAfterAck(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{ClientID: "rc", CleanStart: true, KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropReceiveMaximum)
	cp.Properties.ReceiveMaximum = 1
	cp.Properties.Present.Add(packets.PropTopicAliasMaximum)
	cp.Properties.TopicAliasMaximum = 4
	if ack := r.connect(cp); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	pr := &poisonRecycler{}
	m1, m2 := pr.message("resp/rc", "one"), pr.message("resp/rc", "two")
	for _, m := range []*Message{m1, m2} {
		if err := ts.SendToRecycled("rc", m, pr); err != nil {
			t.Fatal(err)
		}
	}
	p1 := r.expectPublish()
	if p1.Topic != "resp/rc" || string(p1.Payload) != "one" || p1.Properties.TopicAlias != 1 {
		t.Fatalf("first: %+v", p1)
	}
	r.nothing(100 * time.Millisecond) // m2 waits for the quota
	if n := pr.count(); n != 0 {
		t.Fatalf("%d recycled before any PUBACK", n)
	}
	r.send(&packets.Puback{PacketID: p1.PacketID})
	// m2 leaves once m1 is acknowledged, by its alias alone: the alias
	// table kept its own copy of m1's topic, now overwritten.
	p2 := r.expectPublish()
	if p2.Topic != "" || p2.Properties.TopicAlias != 1 || string(p2.Payload) != "two" || string(p2.Properties.CorrelationData) != "two" {
		t.Fatalf("second: %+v", p2)
	}
	testutil.WaitFor(t, 5*time.Second, "m1 recycled", func() bool { return pr.count() == 1 })
	r.send(&packets.Puback{PacketID: p2.PacketID})
	r.send(&packets.Puback{PacketID: p2.PacketID}) // a duplicate recycles nothing twice
	testutil.WaitFor(t, 5*time.Second, "m2 recycled", func() bool { return pr.count() == 2 })
	r.nothing(100 * time.Millisecond)
	pr.mu.Lock()
	if pr.got[0] != m1 || pr.got[1] != m2 {
		t.Errorf("recycled %p %p, want %p %p", pr.got[0], pr.got[1], m1, m2)
	}
	pr.mu.Unlock()
	// A message not kept (no session) is not recycled: it is the
	// caller's again.
	if err := ts.SendToRecycled("nobody", pr.message("x", "y"), pr); err == nil {
		t.Fatal("SendToRecycled to no session succeeded")
	}
	if n := pr.count(); n != 2 {
		t.Fatalf("%d recycled, want 2", n)
	}
}

// TestSendToRecycledSavedSession: a message in flight when its session
// went to the backend (the connection dropped with a session expiry) is
// the backend's too: it is resent whole with DUP on the resumed session
// and never recycled, not even once acknowledged.
func TestSendToRecycledSavedSession(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.SessionExpiryMax = time.Hour })
	connect := func() (*rawClient, *packets.Connack) {
		r := dialRaw(t, ts.addr, v5)
		cp := &packets.Connect{ClientID: "rs", KeepAlive: 60}
		cp.Properties.Present.Add(packets.PropSessionExpiry)
		cp.Properties.SessionExpiry = 600
		return r, r.connect(cp)
	}
	r, _ := connect()
	pr := &poisonRecycler{}
	if err := ts.SendToRecycled("rs", pr.message("resp/rs", "kept"), pr); err != nil {
		t.Fatal(err)
	}
	if p := r.expectPublish(); string(p.Payload) != "kept" {
		t.Fatalf("%+v", p)
	}
	r.nc.Close() // no PUBACK
	testutil.WaitFor(t, 5*time.Second, "session saved", func() bool {
		st, _, _ := ts.backend.LoadSession(t.Context(), "rs")
		return st != nil && len(st.Pending) == 1
	})
	r, ack := connect()
	if !ack.SessionPresent {
		t.Fatal("session not resumed")
	}
	p := r.expectPublish()
	if !p.Dup || p.Topic != "resp/rs" || string(p.Payload) != "kept" || string(p.Properties.CorrelationData) != "kept" {
		t.Fatalf("resent: %+v", p)
	}
	r.send(&packets.Puback{PacketID: p.PacketID})
	if err := ts.SendTo("rs", &Message{Topic: "resp/rs", QoS: 1, Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if p := r.expectPublish(); string(p.Payload) != "after" {
		t.Fatalf("%+v", p)
	}
	if n := pr.count(); n != 0 {
		t.Fatalf("a message of a saved session was recycled (%d)", n)
	}
}

// TestSendToRecycledAckWithProperties: a PUBACK carrying properties (a
// reason string, a user property: copied out of the input, unlike a
// bare one's nothing) completes its message as a bare PUBACK does.
func TestSendToRecycledAckWithProperties(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v5)
	if ack := r.connect(&packets.Connect{ClientID: "rp", CleanStart: true, KeepAlive: 60}); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	pr := &poisonRecycler{}
	for _, payload := range []string{"one", "two"} {
		if err := ts.SendToRecycled("rp", pr.message("resp/rp", payload), pr); err != nil {
			t.Fatal(err)
		}
	}
	p1, p2 := r.expectPublish(), r.expectPublish()
	withProps := &packets.Puback{PacketID: p1.PacketID}
	withProps.Properties.Present.Add(packets.PropReasonString)
	withProps.Properties.ReasonString = "done"
	withProps.Properties.User = []packets.UserProperty{{Key: "k", Value: "v"}}
	r.send(withProps)
	testutil.WaitFor(t, 5*time.Second, "the message acknowledged with properties recycled", func() bool { return pr.count() == 1 })
	r.send(&packets.Puback{PacketID: p2.PacketID})
	testutil.WaitFor(t, 5*time.Second, "the message acknowledged bare recycled", func() bool { return pr.count() == 2 })
	r.nothing(100 * time.Millisecond) // neither is sent again
}

// TestOnAcked: Options.OnAcked hears of each QoS 1 and 2 message once its
// client acknowledged it (PUBACK; PUBCOMP), with the client id, and not
// of QoS 0 ones, unacknowledged ones, nor a duplicate PUBACK.
func TestOnAcked(t *testing.T) {
	var mu sync.Mutex
	var acked []string
	ts := startServer(t, func(o *Options) {
		o.OnAcked = func(clientID string, m *Message) {
			mu.Lock()
			acked = append(acked, clientID+" "+string(m.Payload))
			mu.Unlock()
		}
	})
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), acked...)
	}
	r := dialRaw(t, ts.addr, v5)
	if ack := r.connect(&packets.Connect{ClientID: "ac", CleanStart: true, KeepAlive: 60}); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	for _, m := range []*Message{{Topic: "t", Payload: []byte("q0")}, {Topic: "t", Payload: []byte("q1"), QoS: 1},
		{Topic: "t", Payload: []byte("q2"), QoS: 2}} {
		if err := ts.SendTo("ac", m); err != nil {
			t.Fatal(err)
		}
	}
	var p1, p2 *packets.Publish
	for range 3 {
		switch p := r.expectPublish(); string(p.Payload) {
		case "q1":
			p1 = p
		case "q2":
			p2 = p
		}
	}
	r.nothing(50 * time.Millisecond)
	if a := got(); len(a) != 0 {
		t.Fatalf("acked before any acknowledgement: %q", a)
	}
	r.send(&packets.Puback{PacketID: p1.PacketID})
	r.send(&packets.Puback{PacketID: p1.PacketID}) // a duplicate
	r.send(&packets.Pubrec{PacketID: p2.PacketID})
	if p, ok := r.recv().(*packets.Pubrel); !ok || p.PacketID != p2.PacketID {
		t.Fatalf("after PUBREC: %#v", p)
	}
	testutil.WaitFor(t, 5*time.Second, "q1 acked", func() bool { return len(got()) == 1 })
	r.send(&packets.Pubcomp{PacketID: p2.PacketID})
	testutil.WaitFor(t, 5*time.Second, "q2 acked", func() bool { return len(got()) == 2 })
	r.nothing(100 * time.Millisecond)
	if a := got(); len(a) != 2 || a[0] != "ac q1" || a[1] != "ac q2" {
		t.Fatalf("acked %q, want [ac q1, ac q2]", a)
	}
}
