package amqp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

func TestConfirms(t *testing.T) {
	s, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.ConfirmSelectOk](c, 1, &wire.ConfirmSelect{})
	q := c.declareQueue(1, "q", wire.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	// Three publishes in one write: 1 and 2 fit, 3 overflows, 4 has no
	// route (acked after its return).
	var b []byte
	for i := range 3 {
		b = append(b, publishFrames(1, "", q, wire.Properties{}, []byte(fmt.Sprint(i)), false)...)
	}
	b = append(b, publishFrames(1, "amq.direct", "none", wire.Properties{}, []byte("r"), true)...)
	c.write(b)
	acked := map[uint64]string{}
	for len(acked) < 4 {
		m := c.next()
		switch v := m.m.(type) {
		case *wire.BasicAck:
			lo := uint64(len(acked)) + 1
			if !v.Multiple {
				lo = v.DeliveryTag
			}
			for t := lo; t <= v.DeliveryTag; t++ {
				acked[t] = "ack"
			}
		case *wire.BasicNack:
			acked[v.DeliveryTag] = "nack"
		case *wire.BasicReturn:
			if acked[4] != "" {
				t.Fatal("return after its confirm")
			}
		default:
			t.Fatalf("unexpected %s", wire.Name(m.m))
		}
	}
	want := map[uint64]string{1: "ack", 2: "ack", 3: "nack", 4: "ack"}
	if !equal(acked, want) {
		t.Fatalf("confirms %v, want %v", acked, want)
	}
	if st := s.Stats(); st.Confirmed != 3 || st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	// confirm and tx exclude each other.
	c.send(1, &wire.TxSelect{})
	c.expectChannelClose(1, wire.PreconditionFailed)
}

func TestDurableQueueRecovery(t *testing.T) {
	be := newMemBackend()
	be.async = true
	s1, addr := startServer(t, Options{Backend: be})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "dx", Type: "topic", Durable: true})
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "dq", Durable: true, Arguments: wire.Table{"x-max-length": int32(100)}})
	c.bind(1, "dq", "dx", "a.#", nil)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "tq"}) // transient
	call[*wire.ConfirmSelectOk](c, 1, &wire.ConfirmSelect{})
	for i := range 5 {
		c.publishProps(1, "dx", "a.b", wire.Properties{DeliveryMode: 2, MessageID: fmt.Sprint("id", i)}, fmt.Sprint(i), false)
	}
	got := 0
	for got < 5 {
		a := expect[*wire.BasicAck](c)
		got = int(a.DeliveryTag)
	}
	if n, _ := be.log("/", "dq").state(); n != 5 {
		t.Fatalf("log holds %d messages after 5 confirms, want 5", n)
	}
	// Ack the first two; the commit follows in the background.
	c.get(1, "dq", false)
	g, _, _ := c.get(1, "dq", false)
	c.send(1, &wire.BasicAck{DeliveryTag: g.DeliveryTag, Multiple: true})
	waitFor(t, "the commit of offset 2", func() bool { _, off := be.log("/", "dq").state(); return off == 2 })
	c.get(1, "dq", false) // "2" unacked when the server goes down
	c.nc.Close()
	waitFor(t, "the connection gone", func() bool { return s1.Stats().Connections == 0 })
	s1.Close()
	if l := be.log("/", "dq"); !l.closed {
		t.Fatal("Close left the queue's log open")
	}

	// A new server on the same backend: exchange, queue, binding and the
	// three unacknowledged messages are back, redelivered.
	_, addr2 := startServer(t, Options{Backend: be})
	c2 := dial(t, addr2)
	c2.openChannel(1)
	ok := call[*wire.QueueDeclareOk](c2, 1, &wire.QueueDeclare{Queue: "dq", Passive: true})
	if ok.MessageCount != 3 {
		t.Fatalf("recovered %d messages, want 3", ok.MessageCount)
	}
	c2.send(1, &wire.QueueDeclare{Queue: "tq", Passive: true})
	c2.expectChannelClose(1, wire.NotFound)
	c2.openChannel(1)
	for _, want := range []string{"2", "3", "4"} {
		g, m := expectGet(c2, "dq")
		if string(m.body) != want || !g.Redelivered || m.props.MessageID != "id"+want {
			t.Fatalf("recovered %q %+v, want %q redelivered", m.body, m.props, want)
		}
	}
	c2.publish(1, "dx", "a.z", "new")
	if _, body, ok := c2.get(1, "dq", true); !ok || body != "new" {
		t.Fatalf("binding not recovered: %q %v", body, ok)
	}
	// Deleting the queue deletes its log.
	call[*wire.QueueDeleteOk](c2, 1, &wire.QueueDelete{Queue: "dq"})
	if be.log("/", "dq") != nil {
		t.Fatal("log of the deleted queue still there")
	}
}

func expectGet(c *tclient, q string) (*wire.BasicGetOk, tmsg) {
	c.t.Helper()
	c.send(1, &wire.BasicGet{Queue: q, NoAck: true})
	return expectMsg[*wire.BasicGetOk](c)
}

func TestConfirmNackWhenStoreFails(t *testing.T) {
	be := newMemBackend()
	be.failAfter = 1
	_, addr := startServer(t, Options{Backend: be})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "dq", Durable: true})
	call[*wire.ConfirmSelectOk](c, 1, &wire.ConfirmSelect{})
	c.publish(1, "", "dq", "stored")
	if a := expect[*wire.BasicAck](c); a.DeliveryTag != 1 {
		t.Fatalf("ack %+v", a)
	}
	c.publish(1, "", "dq", "lost")
	if n := expect[*wire.BasicNack](c); n.DeliveryTag != 2 {
		t.Fatalf("nack %+v", n)
	}
	if n, _ := be.log("/", "dq").state(); n != 1 {
		t.Fatalf("log holds %d messages, want only the stored one", n)
	}
}

// TestDurableDeliverBeforeStoredConfirmAfter: a durable queue's message
// is deliverable while its log has not answered yet, the publisher's
// confirm waits for the log, and an ack that came first still lets the
// committed offset pass the message.
func TestDurableDeliverBeforeStoredConfirmAfter(t *testing.T) {
	be := newMemBackend()
	be.hold = true
	_, addr := startServer(t, Options{Backend: be})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "dq", Durable: true})
	call[*wire.ConfirmSelectOk](c, 1, &wire.ConfirmSelect{})
	c.publish(1, "", "dq", "early")
	c.openChannel(2)
	g, body, ok := c.get(2, "dq", false)
	if !ok || body != "early" {
		t.Fatalf("get before the store answered: %q %v", body, ok)
	}
	c.send(2, &wire.BasicAck{DeliveryTag: g.DeliveryTag})
	// A round trip on channel 2: no confirm has come on channel 1.
	call[*wire.BasicQosOk](c, 2, &wire.BasicQos{})
	be.release()
	if a := expect[*wire.BasicAck](c); a.DeliveryTag != 1 {
		t.Fatalf("confirm %+v", a)
	}
	waitFor(t, "the commit past the acked message", func() bool { _, off := be.log("/", "dq").state(); return off == 1 })
}

// TestStoreFailureWithoutConfirmsClosesChannel: without confirms the
// publisher learns of a failed store by 541 INTERNAL_ERROR.
func TestStoreFailureWithoutConfirmsClosesChannel(t *testing.T) {
	be := newMemBackend()
	be.failAfter = 0
	_, addr := startServer(t, Options{Backend: be})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "dq", Durable: true})
	c.publish(1, "", "dq", "lost")
	c.expectChannelClose(1, wire.InternalError)
	c.openChannel(1)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "dq", Passive: true})
}

func TestUnconfiguredVhostDefinitionsKeptButClosed(t *testing.T) {
	be := newMemBackend()
	be.defs = Definitions{Queues: []QueueDef{{VHost: "old", Name: "kept"}, {VHost: "/", Name: "mine"}}}
	_, addr := startServer(t, Options{Backend: be})
	if err := dialRaw(t, addr).handshake("guest", "guest", "old", 0); err == nil {
		t.Fatal("opened a virtual host that is not configured")
	}
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "mine", Durable: true, Passive: true})
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "new", Durable: true})
	be.mu.Lock()
	n := len(be.defs.Queues)
	be.mu.Unlock()
	if n != 3 {
		t.Fatalf("saved %d queues, want 3 (old's kept)", n)
	}
}

// TestConfirmsOfOneAppendInOneAck: the messages one Append stored are
// confirmed with one basic.ack (multiple), not one frame each.
func TestConfirmsOfOneAppendInOneAck(t *testing.T) {
	be := newMemBackend()
	gate := make(chan struct{})
	be.gate, be.hold = gate, true
	s, addr := startServer(t, Options{Backend: be})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.ConfirmSelectOk](c, 1, &wire.ConfirmSelect{})
	q := call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "q", Durable: true}).Queue
	// The first Append waits at the gate until all ten are routed: the
	// ten go into the log in one or two Appends.
	var b []byte
	for i := range 10 {
		b = append(b, publishFrames(1, "", q, wire.Properties{DeliveryMode: 2}, []byte(fmt.Sprint(i)), false)...)
	}
	c.write(b)
	waitFor(t, "ten publishes routed", func() bool { return s.Stats().Published == 10 })
	close(gate)
	waitFor(t, "ten messages in the log", func() bool {
		n, _ := be.log("/", q).state()
		return n == 10
	})
	be.mu.Lock()
	appends := len(be.held)
	be.mu.Unlock()
	if appends > 2 {
		t.Fatalf("%d Appends, want 1 or 2", appends)
	}
	be.release()
	var got []string
	for len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "ack 10 ") {
		m := c.next()
		a, ok := m.m.(*wire.BasicAck)
		if !ok {
			t.Fatalf("got %s after %v, want basic.ack", wire.Name(m.m), got)
		}
		got = append(got, fmt.Sprintf("ack %d multiple=%v", a.DeliveryTag, a.Multiple))
	}
	if len(got) != appends || got[len(got)-1] != "ack 10 multiple=true" {
		t.Fatalf("confirms %v of %d Appends, want one basic.ack (multiple) for each", got, appends)
	}
}

// TestTxCommitWaitsForStore: tx.commit-ok comes only after the durable
// queue's log stored the transaction's message.
func TestTxCommitWaitsForStore(t *testing.T) {
	be := newMemBackend()
	be.hold = true
	_, addr := startServer(t, Options{Backend: be})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "dq", Durable: true})
	call[*wire.TxSelectOk](c, 1, &wire.TxSelect{})
	c.publish(1, "", "dq", "tx")
	c.send(1, &wire.TxCommit{})
	c.openChannel(2) // round trip: commit-ok has not come
	be.release()
	expect[*wire.TxCommitOk](c)
}

// A log whose newest messages cannot be read when the queue loads (a
// broker restarted on a full disk indexes its last records only once
// space frees) and which then stores a new message after them: the
// queue reads the ones it missed and delivers them, and no commit passes
// them first. They used to be skipped: the low-water mark moved over
// offsets the queue never held, so confirmed messages were never
// delivered and were committed away.
func TestDurableQueueLoadsMessagesItMissedAtStart(t *testing.T) {
	be := newMemBackend()
	s1, addr := startServer(t, Options{Backend: be})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "dq", Durable: true})
	call[*wire.ConfirmSelectOk](c, 1, &wire.ConfirmSelect{})
	for i := range 10 {
		c.publishProps(1, "", "dq", wire.Properties{DeliveryMode: 2}, fmt.Sprint(i), false)
	}
	for got := 0; got < 10; {
		got = int(expect[*wire.BasicAck](c).DeliveryTag)
	}
	c.nc.Close()
	waitFor(t, "the connection gone", func() bool { return s1.Stats().Connections == 0 })
	s1.Close()

	l := be.log("/", "dq")
	be.mu.Lock()
	l.hidden = 3
	be.mu.Unlock()
	_, addr2 := startServer(t, Options{Backend: be})
	c2 := dial(t, addr2)
	c2.openChannel(1)
	if ok := call[*wire.QueueDeclareOk](c2, 1, &wire.QueueDeclare{Queue: "dq", Passive: true}); ok.MessageCount != 7 {
		t.Fatalf("loaded %d messages with 3 unreadable, want 7", ok.MessageCount)
	}
	be.mu.Lock()
	l.hidden = 0
	be.mu.Unlock()
	call[*wire.ConfirmSelectOk](c2, 1, &wire.ConfirmSelect{})
	c2.publishProps(1, "", "dq", wire.Properties{DeliveryMode: 2}, "new", false)
	expect[*wire.BasicAck](c2)
	var got []string
	waitFor(t, "every message", func() bool {
		for {
			_, body, ok := c2.get(1, "dq", true)
			if !ok {
				break
			}
			got = append(got, body)
		}
		return len(got) >= 11
	})
	slices.Sort(got)
	if want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "new"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	waitFor(t, "the commit of every message", func() bool { _, off := l.state(); return off == 11 })
}
