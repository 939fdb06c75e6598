package statestore

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/mqtt/packets"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreMQTTStalledWatcher: a watcher that stops reading (its
// socket is never read again) must not hold up the
// writer of the key it watches nor another watcher of it. 2,000 SETs of
// 8 KiB values, 16 MB of notifications for the stalled one, more than its
// socket, its connection's output bound (bridge.max_outbound) and its
// session queue (bridge.max_queued_messages) hold: every SET is answered
// and the healthy watcher gets every change, in order.
func TestStateStoreMQTTStalledWatcher(t *testing.T) {
	eachFront(t, func(t *testing.T, ctx context.Context, e *env) {
		// A raw MQTT 5 client: after the KEYNOTIFY response it reads its
		// socket no more (a library client would buffer for it).
		rc := mqtttest.Dial(t, e.addr, packets.Version5)
		if ack := rc.Connect(&packets.Connect{ClientID: "stalled-watcher", CleanStart: true, KeepAlive: 60}); ack.ReasonCode != 0 {
			t.Fatalf("CONNACK %v", ack.ReasonCode)
		}
		req := &packets.Publish{QoS: 1, PacketID: 1, Topic: statestore.RequestTopic,
			Payload: statestore.AppendRequest(nil, []byte("KEYNOTIFY"), []byte("hot"))}
		req.Properties.Present.Add(packets.PropResponseTopic)
		req.Properties.ResponseTopic = "stalled/resp"
		req.Properties.Present.Add(packets.PropCorrelationData)
		req.Properties.CorrelationData = bytes.Repeat([]byte{9}, 16)
		req.Properties.Present.Add(packets.PropMessageExpiry)
		req.Properties.MessageExpiry = 10
		rc.Send(req)
		if p, ok := rc.Recv().(*packets.Publish); !ok || string(p.Payload) != "+OK\r\n" {
			t.Fatalf("KEYNOTIFY: %+v", p)
		}

		w := e.dial(t, "healthy-watcher")
		if err := w.KeyNotify(ctx, []byte("hot"), false); err != nil {
			t.Fatal(err)
		}
		const n = 2000
		seen := make(chan []sscli.Notification, 1)
		go func() {
			var ns []sscli.Notification
			defer func() { seen <- ns }()
			for len(ns) < n {
				select {
				case x := <-w.Notifications():
					ns = append(ns, x)
				case <-ctx.Done():
					return
				}
			}
		}()
		c := e.dial(t, "hot-writer")
		val := bytes.Repeat([]byte("v"), 8<<10)
		versions := make([]statestore.HLC, n)
		for i := range n {
			copy(val, fmt.Sprintf("%08d", i))
			applied, v, err := c.Set(ctx, []byte("hot"), val, sscli.SetOptions{})
			if err != nil || !applied {
				t.Fatalf("SET %d: %v %v", i, applied, err)
			}
			versions[i] = v
		}
		// The stall was real: the server dropped notifications of the
		// stalled watcher or cut it off as a slow reader.
		if st := e.srv.Stats(); st.Dropped.Load() == 0 && st.SlowReaders.Load() == 0 {
			t.Fatalf("the stalled watcher took all %d notifications: nothing was stalled", n)
		}
		ns := <-seen
		if len(ns) != n {
			t.Fatalf("healthy watcher got %d of %d notifications", len(ns), n)
		}
		for i, x := range ns {
			if x.Op != statestore.OpSet || x.Version.Compare(versions[i]) != 0 || string(x.Value[:8]) != fmt.Sprintf("%08d", i) {
				t.Fatalf("notification %d: %v %v %q, want SET %v", i, x.Op, x.Version, x.Value[:8], versions[i])
			}
		}
	})
}
