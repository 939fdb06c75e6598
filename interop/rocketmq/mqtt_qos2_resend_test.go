package rocketmq

import (
	"fmt"
	"testing"
)

// TestInteropMQTTQoS2ResendAfterDrop: a device publishes at QoS 2, gets
// the PUBREC and loses its connection before it sent the PUBREL; it
// reconnects (Clean Start false, so its session and the exchange in
// progress stay) and sends the PUBLISH again with DUP and the same packet
// id, as MQTT 4.4 has it do. The server takes the DUP as the same message
// (PUBREC, then PUBCOMP for the PUBREL), and a QoS 2 subscriber receives
// it exactly once.
func TestInteropMQTTQoS2ResendAfterDrop(t *testing.T) {
	s := startStandalone(t)
	waitBridge(t, s)
	qos2ResendAfterDrop(t, s.mqtt, s.mqtt)
}

// TestInteropMQTTQoS2ResendOnOtherNode: the same, with the device coming
// back to another node of the cluster, which takes over its session and
// the exchange in progress with it.
func TestInteropMQTTQoS2ResendOnOtherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := startTailLost(t)
	b := c.startBridge2(t)
	qos2ResendAfterDrop(t, c.mqttAddr, b)
}

// qos2ResendAfterDrop runs the test: the first PUBLISH goes to addrA,
// the DUP to addrB; the subscriber is on addrA.
func qos2ResendAfterDrop(t *testing.T, addrA, addrB string) {
	t.Helper()
	sub, _ := dialMQTT(t, addrA, "q2r-sub", true)
	sub.subscribe(1, "q2r/#", 2)

	dev, _ := dialMQTT(t, addrA, "q2r-dev", true)
	dev.publishRec(5, "q2r/a", "once", false)
	_ = dev.nc.Close() // no PUBREL, no DISCONNECT

	dev, present := dialMQTT(t, addrB, "q2r-dev", false)
	if !present {
		t.Fatal("the device's session is not present after the drop")
	}
	dev.publishRec(5, "q2r/a", "once", true)
	dev.release(5)
	// The device's next message: the subscriber has everything before it
	// once it has this (one publisher's messages keep their order).
	dev.publish2(6, "q2r/a", "next")
	got := readUntil(sub, "next")
	if len(got) != 1 || got[0] != "once" {
		t.Errorf("the subscriber got %v before the next message, want [once]", got)
	}
}

// TestInteropMQTTQoS2ResendBeforePubrec: the device's connection drops
// right after it sent a QoS 2 PUBLISH, before the PUBREC (the server may
// still be storing the message); on its new connection it sends the
// PUBLISH again with DUP. Each message reaches the subscriber once.
func TestInteropMQTTQoS2ResendBeforePubrec(t *testing.T) {
	s := startStandalone(t)
	waitBridge(t, s)
	qos2ResendBeforePubrec(t, s.mqtt, s.mqtt)
}

// TestInteropMQTTQoS2ResendBeforePubrecOtherNode: the same, the DUP sent
// to another node.
func TestInteropMQTTQoS2ResendBeforePubrecOtherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := startTailLost(t)
	b := c.startBridge2(t)
	qos2ResendBeforePubrec(t, c.mqttAddr, b)
}

// qos2ResendBeforePubrec runs the test: 20 times, a PUBLISH to addrA and
// its DUP to addrB; the subscriber is on addrA.
func qos2ResendBeforePubrec(t *testing.T, addrA, addrB string) {
	t.Helper()
	sub, _ := dialMQTT(t, addrA, "q2b-sub", true)
	sub.subscribe(1, "q2b/#", 2)
	dev, _ := dialMQTT(t, addrA, "q2b-dev", true)
	const n = 20
	for i := range uint16(n) {
		if i > 0 {
			dev, _ = dialMQTT(t, addrA, "q2b-dev", false)
		}
		dev.publish(i+1, "q2b/a", fmt.Sprintf("m-%02d", i), 2, false)
		_ = dev.nc.Close()
		var present bool
		dev, present = dialMQTT(t, addrB, "q2b-dev", false)
		if !present {
			t.Fatalf("message %d: the device's session is not present after the drop", i)
		}
		dev.publishRec(i+1, "q2b/a", fmt.Sprintf("m-%02d", i), true)
		dev.release(i + 1)
	}
	dev.publish2(n+1, "q2b/a", "next")
	count := map[string]int{}
	for _, p := range readUntil(sub, "next") {
		count[p]++
	}
	for i := range n {
		if c := count[fmt.Sprintf("m-%02d", i)]; c != 1 {
			t.Errorf("m-%02d received %d times", i, c)
		}
	}
}
