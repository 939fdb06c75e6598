package mqtt

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestMQTTPublishToShareTopic: a topic name starting with "$share/" is a
// shared subscription's filter, never a message's topic: a v5 PUBLISH to
// one at QoS 1 or 2 is refused with 0x90 (topic name invalid) in the
// PUBACK/PUBREC, one at QoS 0 is dropped, a 3.1.1 one (mosquitto_pub) is
// acknowledged and dropped (3.1.1 has no negative acknowledgement:
// MQTT-3.3.5-2), and a will with such a topic is not published. None
// reaches a subscription whose filter matches the topic, every
// connection stays up. Before, each was stored and delivered.
func TestMQTTPublishToShareTopic(t *testing.T) {
	_, pubBin := mosquittoBins(t)
	ts := startServer(t, nil)
	host, port := hostPort(ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watcher := pahoDial(t, ts.addr, &paho.Connect{ClientID: "share-watcher", CleanStart: true, KeepAlive: 30}, nil)
	if codes := watcher.subscribe(t, nil, paho.SubscribeOptions{Topic: "$share/w/$share/#", QoS: 2},
		paho.SubscribeOptions{Topic: "sentinel", QoS: 0}); !slices.Equal(codes, []byte{2, 0}) {
		t.Fatalf("SUBACK %#x", codes)
	}

	p := pahoDial(t, ts.addr, &paho.Connect{ClientID: "share-pub", CleanStart: true, KeepAlive: 30}, nil)
	for _, qos := range []byte{1, 2} {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := p.Publish(pctx, &paho.Publish{Topic: "$share/g/x", QoS: qos, Payload: []byte("bad")})
		pcancel()
		if resp == nil || resp.ReasonCode != byte(packets.ReasonTopicNameInvalid) {
			t.Fatalf("v5 QoS %d PUBLISH to $share/g/x: %+v %v, want reason 0x90", qos, resp, err)
		}
	}
	if _, err := p.Publish(ctx, &paho.Publish{Topic: "$share/g/x", QoS: 0, Payload: []byte("bad")}); err != nil {
		t.Fatal(err)
	}
	// 3.1.1 at QoS 1: acknowledged (mosquitto_pub exits 0), dropped.
	runMosquitto(t, ctx, false, pubBin, "-h", host, "-p", port, "-q", "1", "-t", "$share/g/x", "-m", "bad")

	// A will to such a topic is not published.
	r := dialRaw(t, ts.addr, packets.Version5)
	r.connect(&packets.Connect{ClientID: "share-will", CleanStart: true, KeepAlive: 30, WillFlag: true,
		WillTopic: "$share/g/will", WillPayload: []byte("bad")})
	r.NC.Close()
	testutil.WaitFor(t, 10*time.Second, "the will's session gone", func() bool { return ts.SessionInstance("share-will") == 0 })

	// The v5 connection is still up and its next PUBLISH goes through.
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := p.Publish(pctx, &paho.Publish{Topic: "sentinel", QoS: 1, Payload: []byte("ok")})
	pcancel()
	if err != nil || resp == nil || resp.ReasonCode != 0 {
		t.Fatalf("PUBLISH after the refusals: %+v %v", resp, err)
	}
	if got := watcher.topicsUntil(t, "sentinel"); len(got) != 0 {
		t.Fatalf("published to $share/ topics reached a subscriber: %q", got)
	}
}
