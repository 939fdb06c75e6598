package rocketmq

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	pp "github.com/eclipse/paho.golang/packets"
)

// TestInteropMQTTEgressPropertiesMQTTCannotCarry: rocketmq-client-go
// produces to MQTT_EGRESS messages whose MQTT properties MQTT 5 cannot
// encode (a response topic with a wildcard, a user property holding
// U+0000), one whose expiry is further away than a Message Expiry
// Interval can say, and a plain one. A persistent session with Receive
// Maximum 2 gets all of them, without those properties and with the
// longest interval. Before, each send of the wildcard one failed to
// encode and it stayed in flight for good (two such took the session's
// quota and it received nothing more, reconnecting gave the same), the
// U+0000 went out in a malformed packet and the far expiry wrapped
// around 2^32 seconds.
func TestInteropMQTTEgressPropertiesMQTTCannotCarry(t *testing.T) {
	s := startStandalone(t)
	for deadline := time.Now().Add(60 * time.Second); !s.logContains("standalone running"); {
		if time.Now().After(deadline) {
			t.Fatal("standalone: the bridge did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	recvMax := uint16(2)
	c, _ := dialConnect(t, s.mqtt, "egress-props", true, 600, func(cp *pp.Connect) { cp.Properties.ReceiveMaximum = &recvMax })
	c.subscribe(1, "egress/#", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := newProducer(t, s, "egress-props")
	farExpiry := strconv.FormatInt(time.Now().AddDate(500, 0, 0).UnixMilli(), 10)
	sends := []struct{ body, prop, value string }{
		{"wildcard-response-topic", "MQTT_RESPONSE_TOPIC", "replies/#"},
		{"nul-user-property", "MQTT_USER_PROPERTIES", `[["ok","1"],["bad","a\u0000b"]]`},
		{"far-expiry", "MQTT_EXPIRY_AT", farExpiry},
		{"plain", "", ""},
	}
	for _, sd := range sends {
		m := primitive.NewMessage("MQTT_EGRESS", []byte(sd.body))
		m.WithProperty("MQTT_TOPIC", "egress/"+sd.body)
		m.WithProperty("MQTT_QOS", "1")
		if sd.prop != "" {
			m.WithProperty(sd.prop, sd.value)
		}
		if res, err := p.SendSync(ctx, m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", sd.body, res, err)
		}
	}
	// The producer spreads them over MQTT_EGRESS's queues: any order.
	got := map[string]bool{}
	for range sends {
		pub := expect[*pp.Publish](c)
		c.ack(pp.PUBACK, pub.PacketID)
		body := string(pub.Payload)
		if got[body] {
			t.Fatalf("%q twice", body)
		}
		got[body] = true
		pr := pub.Properties
		switch body {
		case "wildcard-response-topic":
			if pr != nil && pr.ResponseTopic != "" {
				t.Errorf("response topic %q sent", pr.ResponseTopic)
			}
		case "nul-user-property":
			if pr == nil || len(pr.User) != 1 || pr.User[0].Key != "ok" {
				t.Errorf("user properties %+v, want only ok=1", pr)
			}
		case "far-expiry":
			if pr == nil || pr.MessageExpiry == nil || *pr.MessageExpiry < math.MaxUint32-60 {
				t.Errorf("message expiry interval %v, want about %d", pr.MessageExpiry, uint32(math.MaxUint32))
			}
		}
	}
}
