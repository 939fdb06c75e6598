package bridge

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// TestBridgeSessionRecordBytes pins the JSON of a session record (doc.go).
func TestBridgeSessionRecordBytes(t *testing.T) {
	rec := &sessionRecord{ClientID: "dev1", Node: "n1", Username: "u",
		Subscriptions: subRecords([]mqtt.Subscription{{Filter: "cmd/#", QoS: 1}, {Filter: "a/+", QoS: 2, NoLocal: true, Identifier: 7}}),
		ExpiryMs:      3600000, DisconnectedAt: 1763800000000,
		Resume:  []resumePoint{{Topic: "MQTT_EGRESS", Broker: "broker-a", Queue: 0, From: 17, Live: 20, Pending: []int64{17, 19}}},
		Pending: []pendingRecord{{Topic: "t", Payload: []byte("hi"), QoS: 1, User: []mqtt.UserProperty{{Key: "k", Value: "v"}}}}}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"clientId":"dev1","node":"n1","username":"u","subscriptions":[{"filter":"a/+","qos":2,"noLocal":true,"id":7},` +
		`{"filter":"cmd/#","qos":1}],"expiryMs":3600000,"disconnectedAtMs":1763800000000,` +
		`"resume":[{"topic":"MQTT_EGRESS","broker":"broker-a","queue":0,"from":17,"live":20,"pending":[17,19]}],` +
		`"pending":[{"topic":"t","payload":"aGk=","qos":1,"user":[{"Key":"k","Value":"v"}]}]}`
	if string(b) != want {
		t.Fatalf("record\n got %s\nwant %s", b, want)
	}
	back, err := decodeSessionRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != want {
		t.Fatalf("round trip %s", again)
	}
	for _, bad := range []string{"", "{", `{"node":"x"}`, `[]`, `{"clientId":5}`} {
		if _, err := decodeSessionRecord([]byte(bad)); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

// FuzzBridgeSessionRecord: session records come from a shared topic any
// producer can write; decoding never panics.
func FuzzBridgeSessionRecord(f *testing.F) {
	f.Add([]byte(`{"clientId":"a","resume":[{"topic":"T","from":1,"live":2,"pending":[1]}],"pending":[{"topic":"t","qos":3}]}`))
	f.Add([]byte(`{"clientId":"a","deleted":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeSessionRecord(b)
		if err != nil {
			return
		}
		for i := range rec.Pending {
			_ = rec.Pending[i].message()
		}
		_ = expiredAt(rec, time.Now())
	})
}

// FuzzBridgeFromBroker: any producer can write the device-facing topics;
// turning their properties into an MQTT message never panics.
func FuzzBridgeFromBroker(f *testing.F) {
	f.Add("a/b", "2", "1", `[["k","v"]]`, "AAE=", "1", "1900000000000", "1", []byte("x"))
	f.Add("", "x", "", `[[1]]`, "!!", "9", "-1", "", []byte{})
	f.Fuzz(func(t *testing.T, topic, qos, retain, user, corr, format, expiry, empty string, body []byte) {
		x := &client.MessageExt{Message: client.Message{Topic: "T", Body: body, Properties: map[string]string{
			PropTopic: topic, PropQoS: qos, PropRetain: retain, PropUserProperties: user, PropCorrelationData: corr,
			PropPayloadFormat: format, PropExpiryAt: expiry, PropEmptyPayload: empty}}}
		m := fromBroker(x)
		if m.QoS > 2 || m.Topic == "" {
			t.Fatalf("bad message %+v", m)
		}
	})
}
