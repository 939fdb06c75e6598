package amqp

import (
	"fmt"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

func TestPublishConsumeAck(t *testing.T) {
	s, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	q := c.declareQueue(1, "", nil)
	if len(q) < 10 || q[:8] != "amq.gen-" {
		t.Fatalf("server-named queue %q", q)
	}
	for i := range 3 {
		c.publishProps(1, "", q, wire.Properties{ContentType: "text/plain", Headers: wire.Table{"n": int32(i)}}, fmt.Sprint("m", i), false)
	}
	ok := call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: q, Passive: true})
	if ok.MessageCount != 3 || ok.ConsumerCount != 0 {
		t.Fatalf("declare-ok %+v, want 3 messages", ok)
	}
	tag := c.consume(1, q, "", false)
	for i := range 3 {
		d, m := expectMsg[*wire.BasicDeliver](c)
		if d.ConsumerTag != tag || d.DeliveryTag != uint64(i+1) || d.Redelivered || d.RoutingKey != q || string(m.body) != fmt.Sprint("m", i) {
			t.Fatalf("delivery %d: %+v %q", i, d, m.body)
		}
		if m.props.ContentType != "text/plain" || m.props.Headers["n"] != int32(i) {
			t.Fatalf("properties not forwarded: %+v", m.props)
		}
	}
	c.send(1, &wire.BasicAck{DeliveryTag: 3, Multiple: true})
	waitFor(t, "acks", func() bool { st := s.Stats(); return st.Acked == 3 && st.MessagesUnacked == 0 })
	// An unknown tag is a channel error.
	c.send(1, &wire.BasicAck{DeliveryTag: 99})
	c.expectChannelClose(1, wire.PreconditionFailed)
}

func TestRejectRequeueOrderAndRedelivered(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	q := c.declareQueue(1, "q", nil)
	for i := range 5 {
		c.publish(1, "", q, fmt.Sprint(i))
	}
	var tags []uint64
	for i := range 3 {
		g, body, ok := c.get(1, q, false)
		if !ok || body != fmt.Sprint(i) {
			t.Fatalf("get %d: %q %v", i, body, ok)
		}
		tags = append(tags, g.DeliveryTag)
	}
	// Requeue 1, then 0: each goes back to its place, before 3 and 4.
	c.send(1, &wire.BasicReject{DeliveryTag: tags[1], Requeue: true})
	c.send(1, &wire.BasicNack{DeliveryTag: tags[0], Requeue: true})
	for _, want := range []string{"0", "1", "3"} {
		g, body, _ := c.get(1, q, false)
		if body != want || g.Redelivered != (want != "3") {
			t.Fatalf("got %q redelivered=%v, want %q", body, g.Redelivered, want)
		}
	}
	// Nack multiple with requeue puts back everything unacked (2, 0, 1,
	// 3) in queue order.
	c.send(1, &wire.BasicNack{Multiple: true, Requeue: true})
	call[*wire.BasicQosOk](c, 1, &wire.BasicQos{PrefetchCount: 10})
	c.consume(1, q, "c1", false)
	for _, want := range []string{"0", "1", "2", "3", "4"} {
		d, body := c.deliver()
		if body != want || d.Redelivered != (want != "4") {
			t.Fatalf("got %q redelivered=%v, want %q", body, d.Redelivered, want)
		}
	}
	// Reject without requeue drops it (no dead-letter exchange).
	c.send(1, &wire.BasicReject{DeliveryTag: 9})
	c.send(1, &wire.BasicAck{Multiple: true})
	ok := call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: q, Passive: true})
	if ok.MessageCount != 0 || ok.ConsumerCount != 1 {
		t.Fatalf("declare-ok %+v", ok)
	}
}

func TestCloseRequeuesUnacked(t *testing.T) {
	s, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	q := c.declareQueue(1, "q", nil)
	c.publish(1, "", q, "a")
	c.publish(1, "", q, "b")
	c.consume(1, q, "", false)
	c.deliver()
	c.deliver()
	call[*wire.ChannelCloseOk](c, 1, &wire.ChannelClose{})
	c.openChannel(2)
	ok := call[*wire.QueueDeclareOk](c, 2, &wire.QueueDeclare{Queue: q, Passive: true})
	if ok.MessageCount != 2 {
		t.Fatalf("after channel close %d ready, want 2", ok.MessageCount)
	}
	c.consume(2, q, "", false)
	c.deliver() // held unacked by the connection that now goes away
	c.nc.Close()
	waitFor(t, "the connection's messages back", func() bool {
		st := s.Stats()
		return st.Connections == 0 && st.MessagesReady == 2 && st.MessagesUnacked == 0
	})
	c2 := dial(t, addr)
	c2.openChannel(1)
	g, body, ok2 := c2.get(1, q, false)
	if !ok2 || body != "a" || !g.Redelivered || g.MessageCount != 1 {
		t.Fatalf("get %+v %q %v", g, body, ok2)
	}
	c2.send(1, &wire.BasicRecover{Requeue: true})
	expect[*wire.BasicRecoverOk](c2)
	if g, body, _ := c2.get(1, q, true); body != "a" || !g.Redelivered {
		t.Fatalf("after recover got %q", body)
	}
	c2.get(1, q, true)
	if _, _, ok := c2.get(1, q, true); ok {
		t.Fatal("queue not empty")
	}
	c2.send(1, &wire.BasicRecover{Requeue: false})
	c2.expectConnClose(wire.NotImplemented)
}

func TestPrefetchGlobalAndPerConsumer(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	q := c.declareQueue(1, "q", nil)
	call[*wire.BasicQosOk](c, 1, &wire.BasicQos{PrefetchCount: 3, Global: true})
	call[*wire.BasicQosOk](c, 1, &wire.BasicQos{PrefetchCount: 2})
	c.consume(1, q, "a", false)
	c.consume(1, q, "b", false)
	for i := range 10 {
		c.publish(1, "", q, fmt.Sprint(i))
	}
	// per consumer 2, channel 3: three deliveries in all.
	per := map[string]int{}
	var last uint64
	for range 3 {
		d, _ := c.deliver()
		per[d.ConsumerTag]++
		last = d.DeliveryTag
	}
	if per["a"] > 2 || per["b"] > 2 {
		t.Fatalf("per-consumer prefetch exceeded: %v", per)
	}
	// Nothing else comes until an ack: a basic.qos round trip proves it.
	if m := call[*wire.BasicQosOk](c, 1, &wire.BasicQos{PrefetchCount: 2}); m == nil {
		t.Fatal("no qos-ok")
	}
	c.send(1, &wire.BasicAck{DeliveryTag: last})
	c.deliver()
}

func TestExclusiveQueueAndConsumer(t *testing.T) {
	s, addr := startServer(t, Options{})
	a := dial(t, addr)
	a.openChannel(1)
	call[*wire.QueueDeclareOk](a, 1, &wire.QueueDeclare{Queue: "ex", Exclusive: true})
	b := dial(t, addr)
	b.openChannel(1)
	b.send(1, &wire.QueueDeclare{Queue: "ex", Exclusive: true})
	b.expectChannelClose(1, wire.ResourceLocked)
	b.openChannel(1)
	b.send(1, &wire.BasicConsume{Queue: "ex"})
	b.expectChannelClose(1, wire.ResourceLocked)
	// Exclusive consumers.
	b.openChannel(1)
	q := b.declareQueue(1, "shared", nil)
	call[*wire.BasicConsumeOk](b, 1, &wire.BasicConsume{Queue: q, Exclusive: true})
	a.send(1, &wire.BasicConsume{Queue: q})
	a.expectChannelClose(1, wire.AccessRefused)
	a.openChannel(1)
	// Duplicate consumer tag: connection error 530.
	b.declareQueue(1, "other", nil)
	b.consume(1, "other", "dup", false)
	b.send(1, &wire.BasicConsume{Queue: "other", ConsumerTag: "dup"})
	b.expectConnClose(wire.NotAllowed)
	// a's exclusive queue goes with a.
	a.nc.Close()
	waitFor(t, "the exclusive queue deleted", func() bool { return s.Stats().Queues == 2 })
	c := dial(t, addr)
	c.openChannel(1)
	c.send(1, &wire.QueueDeclare{Queue: "ex", Passive: true})
	c.expectChannelClose(1, wire.NotFound)
}

func TestConsumerPriorities(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	c.declareQueue(1, "q", nil)
	call[*wire.BasicQosOk](c, 1, &wire.BasicQos{PrefetchCount: 2})
	call[*wire.BasicConsumeOk](c, 1, &wire.BasicConsume{Queue: "q", ConsumerTag: "low"})
	call[*wire.BasicConsumeOk](c, 1, &wire.BasicConsume{Queue: "q", ConsumerTag: "high", Arguments: wire.Table{"x-priority": int32(10)}})
	for i := range 3 {
		c.publish(1, "", "q", fmt.Sprint(i))
	}
	// high takes two (its prefetch), then low gets the third.
	for _, want := range []string{"high", "high", "low"} {
		if d, _ := c.deliver(); d.ConsumerTag != want {
			t.Fatalf("delivered to %s, want %s", d.ConsumerTag, want)
		}
	}
}
