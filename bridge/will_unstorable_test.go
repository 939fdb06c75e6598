package bridge

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeWillOverRecordPropertiesDropped: a will whose topic and user
// properties do not fit a broker record's 32,767 bytes of properties (a
// valid MQTT topic of 40,000 bytes; 40,000 bytes of user properties) is
// refused for good and dropped, not owed. Before, the producer's refusal
// (client.ErrBadMessage) was an ordinary failure: the server kept the
// will and tried it again, with backoff, for as long as it ran, one per
// connection that ended, so a client reconnecting with such a will grew
// the server's memory without bound. The QoS 1 PUBLISH of such a message
// is answered 0x83 implementation specific error (no retry stores it;
// it was 0x80, as for a failure that may pass) with the reason.
func TestBridgeWillOverRecordPropertiesDropped(t *testing.T) {
	c := startCluster(t)
	logs := &testutil.LogBuffer{}
	a := startBridgeWith(t, c, func(mo *mqtt.Options, bo *Options) {
		bo.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}, nil)
	longTopic := "will/" + strings.Repeat("x", 40000)
	for _, w := range []struct {
		id    string
		topic string
		user  []packets.UserProperty
	}{
		{"wl-topic", longTopic, nil},
		{"wl-props", "will/props", []packets.UserProperty{{Key: strings.Repeat("k", 20000), Value: strings.Repeat("v", 20000)}}},
	} {
		r := dialRaw(t, addrOf(a), packets.Version5)
		cp := &packets.Connect{ClientID: w.id, CleanStart: true, KeepAlive: 60, WillFlag: true, WillQoS: 1,
			WillTopic: w.topic, WillPayload: []byte("offline")}
		if w.user != nil {
			cp.WillProperties.User = w.user
		}
		r.connect(cp)
		r.nc.Close()
		testutil.WaitFor(t, 30*time.Second, "the will of "+w.id+" tried", func() bool {
			s := logs.String()
			return strings.Contains(s, "client="+w.id) && (strings.Contains(s, "will cannot be stored; dropped") || strings.Contains(s, "publish will; trying again"))
		})
		dropped := false
		for _, line := range strings.Split(logs.String(), "\n") {
			if !strings.Contains(line, "client="+w.id) {
				continue
			}
			if strings.Contains(line, "publish will; trying again") {
				t.Fatalf("the will of %s is kept to try again: %s", w.id, line)
			}
			dropped = dropped || strings.Contains(line, "will cannot be stored; dropped") && strings.Contains(line, "properties too long")
		}
		if !dropped {
			t.Fatalf("the will of %s not dropped for its properties' length:\n%s", w.id, logs.String())
		}
		if got, ok := a.Server().Will(w.id); ok {
			t.Fatalf("the will of %s is owed: %+v", w.id, got)
		}
	}

	p := dialRaw(t, addrOf(a), packets.Version5)
	p.connect(&packets.Connect{ClientID: "pl", CleanStart: true, KeepAlive: 60})
	p.send(&packets.Publish{Topic: longTopic, QoS: 1, PacketID: 1, Payload: []byte("x")})
	ack, ok := p.recv().(*packets.Puback)
	if !ok || ack.ReasonCode != packets.ReasonImplementationSpecificError || !strings.Contains(ack.Properties.ReasonString, "properties too long") {
		t.Fatalf("PUBLISH to a 40,000-byte topic answered %+v, want PUBACK 0x83 naming the properties", ack)
	}
}
