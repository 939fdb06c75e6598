package rocketmq

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	pp "github.com/eclipse/paho.golang/packets"

	"github.com/smartgo/smartgo/internal/testutil"
)

// stored counts the bodies of the messages of a broker topic from its
// first offset, one queue at a time in order (an orderly consumer).
type stored struct {
	mu     sync.Mutex
	bodies map[string]int
}

func countStored(t *testing.T, s *standalone, group, topic string) *stored {
	t.Helper()
	st := &stored{bodies: map[string]int{}}
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		consumer.WithGroupName(group), consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, m := range msgs {
			st.bodies[string(m.Body)]++
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return st
}

func (s *stored) count(body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[body]
}

// TestInteropMQTTQoS2InboundAcrossKill9: a device's QoS 2 PUBLISHes that
// the server stored and PUBREC'd survive a kill -9 of the standalone as
// exchanges in progress, though no checkpoint ran since (the default
// interval is 30 s): after the restart, the resumed session answers the
// PUBREL of the first with PUBCOMP (success, not 0x92 "packet identifier
// not found"), and recognises the second, sent again with DUP as by a
// client that lost its PUBREC, as a duplicate (PUBREC, not stored again).
// Each is stored exactly once.
func TestInteropMQTTQoS2InboundAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process")
	}
	k := startKillable(t)
	pub, _ := dialMQTT(t, k.mqtt, "q2-in", true)
	for id, body := range map[uint16]string{7: "q2-m1", 8: "q2-m2"} {
		pub.publishRec(id, "q2in/a", body, false)
	}
	k.kill9Restart(t)

	pub, present := dialMQTT(t, k.mqtt, "q2-in", false)
	if !present {
		t.Fatal("session lost in the kill")
	}
	pub.release(7)
	pub.publishRec(8, "q2in/a", "q2-m2", true)
	pub.release(8)
	// The id is free again: a new message with it is a new message.
	pub.publish2(8, "q2in/a", "q2-m3")

	// One publisher's messages share a queue: once the last is read,
	// every earlier one was.
	st := countStored(t, &k.standalone, "interop-q2-in", "MQTT_INGRESS")
	testutil.WaitFor(t, 60*time.Second, "the last message stored and read", func() bool { return st.count("q2-m3") > 0 })
	for _, body := range []string{"q2-m1", "q2-m2", "q2-m3"} {
		if n := st.count(body); n != 1 {
			t.Errorf("%s stored %d times, want once", body, n)
		}
	}
}

// TestInteropMQTTQoS2OutboundAcrossKill9: a QoS 2 message the server sent
// and got a PUBREC for (it answered PUBREL) resumes with that PUBREL, not
// as a new PUBLISH, after a kill -9 of the standalone with no checkpoint
// since; after the PUBCOMP it is not delivered again.
func TestInteropMQTTQoS2OutboundAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process")
	}
	k := startKillable(t)
	dev, _ := dialMQTT(t, k.mqtt, "q2-out", true)
	dev.subscribe(1, "q2out/#", 2)
	pub, _ := dialMQTT(t, k.mqtt, "q2-out-pub", true)
	pub.publish2(1, "q2out/a", "o1")
	p := expect[*pp.Publish](dev)
	if string(p.Payload) != "o1" || p.QoS != 2 {
		t.Fatalf("got %q qos %d", p.Payload, p.QoS)
	}
	dev.ack(pp.PUBREC, p.PacketID)
	if r := expect[*pp.Pubrel](dev); r.PacketID != p.PacketID || r.ReasonCode != 0 {
		t.Fatalf("PUBREL %+v, want id %d", r, p.PacketID)
	}
	// The PUBCOMP is withheld.
	k.kill9Restart(t)

	dev, present := dialMQTT(t, k.mqtt, "q2-out", false)
	if !present {
		t.Fatal("session lost in the kill")
	}
	cp := dev.recv()
	if r, ok := cp.Content.(*pp.Pubrel); !ok || r.PacketID != p.PacketID {
		t.Fatalf("want PUBREL %d first after the restart, got %s", p.PacketID, cp)
	}
	dev.ack(pp.PUBCOMP, p.PacketID)
	pub, _ = dialMQTT(t, k.mqtt, "q2-out-pub2", true)
	pub.publish2(1, "q2out/a", "o2")
	next := expect[*pp.Publish](dev)
	if string(next.Payload) != "o2" {
		t.Fatalf("after the PUBCOMP: got %q (dup %v), want o2", next.Payload, next.Duplicate)
	}
}

// publish2 publishes at QoS 2 and completes the exchange.
func (c *mqttRaw) publish2(id uint16, topic, payload string) {
	c.t.Helper()
	c.publishRec(id, topic, payload, false)
	c.release(id)
}

// publishRec publishes at QoS 2 (dup: with DUP) and expects a PUBREC of
// success.
func (c *mqttRaw) publishRec(id uint16, topic, payload string, dup bool) {
	c.t.Helper()
	c.publish(id, topic, payload, 2, dup)
	if r := expect[*pp.Pubrec](c); r.PacketID != id || r.ReasonCode != 0 {
		c.t.Fatalf("PUBREC %+v, want id %d success (dup %v)", r, id, dup)
	}
}

// release sends the PUBREL of id and expects a PUBCOMP of success.
func (c *mqttRaw) release(id uint16) {
	c.t.Helper()
	c.ack(pp.PUBREL, id)
	if r := expect[*pp.Pubcomp](c); r.PacketID != id || r.ReasonCode != 0 {
		c.t.Fatalf("PUBCOMP %+v, want id %d success", r, id)
	}
}
