package bridge

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeIngressBatchOverBrokerLimit: the broker's max_message_size
// (8 KiB here) is below the bridge's ingress batch bound, and the broker
// refuses a batch whose whole body exceeds it. A burst of 1.5 KiB
// publishes, batched by the bridge, is then stored message by message:
// every PUBACK is a success and the broker holds every message once, in
// publish order.
func TestBridgeIngressBatchOverBrokerLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), MaxMessageSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := startBridge(t, c, nil)
	pub := connected(t, addrOf(br), packets.Version5, "limit-pub")
	const n = 60
	payload := func(i int) []byte {
		return append([]byte(strconv.Itoa(i)+"|"), bytes.Repeat([]byte{'p'}, 1536)...)
	}
	for i := 1; i <= n; i++ {
		pub.send(&packets.Publish{QoS: 1, PacketID: uint16(i), Topic: "limit/x", Payload: payload(i)})
	}
	for i := 1; i <= n; i++ {
		a, ok := pub.recv().(*packets.Puback)
		if !ok || a.PacketID != uint16(i) || a.ReasonCode != 0 {
			t.Fatalf("ack %d: %+v", i, a)
		}
	}
	msgs := pollN(t, newPull(t, c, DefaultDefaultTopic), n)
	for i, m := range msgs {
		if got := fromBroker(m); !bytes.Equal(got.Payload, payload(i+1)) {
			t.Fatalf("stored message %d: %.8q", i, got.Payload)
		}
	}
}
