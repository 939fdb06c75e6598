package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// A publish the broker refuses because its disk is full gets PUBACK or
// PUBREC 0x97 quota exceeded (MQTT 5), not 0x80: the broker names the
// cause beside SERVICE_NOT_AVAILABLE and the bridge passes it on. A 3.1.1
// publisher, which has no reason code, is disconnected. Once space frees,
// publishes are stored again.
// Both with topic auto-creation on the brokers and without it (then no
// TBW102 template route exists to fall back on).
func TestBridgeDiskFullPublishQuotaExceeded(t *testing.T) {
	for _, noAuto := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-auto-create=%v", noAuto), func(t *testing.T) { diskFullPublish(t, noAuto) })
	}
}

func diskFullPublish(t *testing.T, noAutoCreate bool) {
	var usage atomic.Value
	usage.Store(0.1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), NoAutoCreateTopic: noAutoCreate,
		DiskUsage: func(string) (float64, error) { return usage.Load().(float64), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := startBridge(t, c, nil)

	nc, err := net.Dial("tcp", addrOf(b))
	if err != nil {
		t.Fatal(err)
	}
	pc := paho.NewClient(paho.ClientConfig{ClientID: "full-dev", Conn: nc})
	if ack, err := pc.Connect(ctx, &paho.Connect{ClientID: "full-dev", CleanStart: true, KeepAlive: 30}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect: %v %+v", err, ack)
	}
	defer pc.Disconnect(&paho.Disconnect{})
	publish := func(qos byte) byte {
		t.Helper()
		pr, err := pc.Publish(ctx, &paho.Publish{Topic: "devices/full-dev/telemetry", QoS: qos, Payload: []byte("x")})
		if pr == nil {
			t.Fatalf("QoS %d publish: %v", qos, err)
		}
		if pr.ReasonCode != 0 && pr.Properties != nil {
			t.Logf("QoS %d: 0x%02x %s", qos, pr.ReasonCode, pr.Properties.ReasonString)
		}
		return pr.ReasonCode
	}
	if rc := publish(1); rc != 0 {
		t.Fatalf("before: PUBACK 0x%02x", rc)
	}

	usage.Store(0.99)
	// The store sees the new usage at its next space check.
	testutil.Eventually(t, 20*time.Second, func() error {
		if rc := publish(1); rc == 0 {
			return errors.New("still stored")
		}
		return nil
	})
	if rc := publish(1); rc != byte(packets.ReasonQuotaExceeded) {
		t.Fatalf("QoS 1 on a full disk: PUBACK 0x%02x, want 0x97", rc)
	}
	if rc := publish(2); rc != byte(packets.ReasonQuotaExceeded) {
		t.Fatalf("QoS 2 on a full disk: PUBREC 0x%02x, want 0x97", rc)
	}

	// 3.1.1: no reason code; the publisher is disconnected.
	r := connected(t, addrOf(b), packets.Version311, "full-old")
	r.send(&packets.Publish{Topic: "devices/full-old/telemetry", QoS: 1, PacketID: 1, Payload: []byte("x")})
	if p, err := r.next(10 * time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("3.1.1 publish on a full disk: got %T %+v, %v; want the connection closed", p, p, err)
	}

	usage.Store(0.5)
	testutil.Eventually(t, 20*time.Second, func() error {
		if rc := publish(1); rc != 0 {
			return fmt.Errorf("PUBACK 0x%02x after space freed", rc)
		}
		return nil
	})
}
