package rocketmq

import (
	"fmt"
	"testing"

	pp "github.com/eclipse/paho.golang/packets"
)

// TestInteropMQTTCleanStartVisibleOnOtherNode: a device with a stored
// session on node A (session expiry 600 s, subscribed at QoS 1, one
// message waiting for it) connects to A again with Clean Start and
// session expiry 600 s, and the moment it has the CONNACK connects to
// node B with Clean Start false. The session B resumes is the one the
// clean start made (MQTT 5 3.1.2.4: it exists from the CONNACK on): the
// CONNACK says session present, no message of the old session arrives
// (not before the SUBACK of a new subscription, nor before a message
// published to that), and B keeps the connection. Ten rounds, each with
// a client id of its own: the window lies between A's CONNACK and the
// record that tells other nodes of the clean start.
func TestInteropMQTTCleanStartVisibleOnOtherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := startTailLost(t)
	b := c.startBridge2(t)
	cleanStartVisible(t, c.mqttAddr, b, 10)
}

// cleanStartVisible runs rounds of the test: the old session and the
// clean start at addrA, the resume at addrB.
func cleanStartVisible(t *testing.T, addrA, addrB string, rounds int) {
	t.Helper()
	pub, _ := dialMQTT(t, addrA, "csv-pub", true)
	var id uint16
	for i := range rounds {
		dev := fmt.Sprintf("csv-dev-%02d", i)
		old, _ := dialMQTT(t, addrA, dev, true)
		old.subscribe(1, "csv/#", 1)
		old.send(pp.NewControlPacket(pp.DISCONNECT))
		_ = old.nc.Close()
		id++
		publishStored(t, pub, id, "csv/a", fmt.Sprintf("old-%02d", i))

		if _, present := dialMQTT(t, addrA, dev, true); present {
			t.Errorf("round %d: CONNACK of a clean start says session present", i)
		}
		onB, present := dialMQTT(t, addrB, dev, false)
		if !present {
			t.Errorf("round %d: the session the clean start on the other node made is not present", i)
		}
		mark := "csv-new/" + dev
		onB.subscribeSeeing(2, mark, 1)
		id++
		publishStored(t, pub, id, mark, fmt.Sprintf("mark-%02d", i))
		if got := readUntil(onB, fmt.Sprintf("mark-%02d", i)); len(got) != 0 {
			t.Errorf("round %d: resumed after the clean start, before the marker, the device got %v", i, got)
		}
		onB.send(pp.NewControlPacket(pp.DISCONNECT))
		_ = onB.nc.Close()
	}
}
