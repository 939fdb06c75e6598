package bridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeSessionRecordBytes pins the JSON of a session record (doc.go).
func TestBridgeSessionRecordBytes(t *testing.T) {
	rec := &sessionRecord{ClientID: "dev1", Node: "n1", Username: "u",
		Subscriptions: subRecords([]mqtt.Subscription{{Filter: "cmd/#", QoS: 1}, {Filter: "a/+", QoS: 2, NoLocal: true, Identifier: 7}}),
		ExpiryMs:      3600000, DisconnectedAt: 1763800000000,
		Resume: []resumePoint{{Topic: "MQTT_EGRESS", Broker: "broker-a", Queue: 0, From: 17, Live: 20, Pending: []int64{17, 19}, Sent: []int64{17},
			SentIDs: []uint16{5}, Prev: &prevRecord{Store: 1763799999000, Born: 1763799998990, Size: 2}}},
		Pending: []pendingRecord{{Topic: "t", Payload: []byte("hi"), QoS: 1, User: []mqtt.UserProperty{{Key: "k", Value: "v"}}},
			{Topic: "r", Payload: []byte("r"), QoS: 2, Retain: true, SubIDs: []uint32{7, 300}, Sent: true, ID: 9}},
		Released: []uint16{12, 65535}, Received: []uint16{3}}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"clientId":"dev1","node":"n1","username":"u","subscriptions":[{"filter":"a/+","qos":2,"noLocal":true,"id":7},` +
		`{"filter":"cmd/#","qos":1}],"expiryMs":3600000,"disconnectedAtMs":1763800000000,` +
		`"resume":[{"topic":"MQTT_EGRESS","broker":"broker-a","queue":0,"from":17,"live":20,"pending":[17,19],"sent":[17],"sentIds":[5],` +
		`"prev":{"store":1763799999000,"born":1763799998990,"size":2}}],` +
		`"pending":[{"topic":"t","payload":"aGk=","qos":1,"user":[{"Key":"k","Value":"v"}]},` +
		`{"topic":"r","payload":"cg==","qos":2,"retain":true,"subIds":[7,300],"sent":true,"id":9}],"released":[12,65535],"received":[3]}`
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
			_ = rec.Pending[i].pending()
		}
		_ = expiredAt(rec, time.Now())
	})
}

// FuzzBridgeFromBroker: any producer can write the device-facing topics;
// turning their properties into an MQTT message never panics, and the
// message of a valid topic encodes as an MQTT 5 PUBLISH whose strings
// are valid (a property that could not be sent used to leave the message
// in flight for good: TestInteropMQTTEgressPropertiesMQTTCannotCarry).
func FuzzBridgeFromBroker(f *testing.F) {
	f.Add("a/b", "2", "1", `[["k","v"]]`, "AAE=", "1", "1900000000000", "1", "r/t", "text/plain", []byte("x"))
	f.Add("", "x", "", `[[1]]`, "!!", "9", "-1", "", "", "", []byte{})
	f.Add("a", "1", "", `[["k","a\u0000b"],["ok","1"]]`, "", "", "99999999999999999", "", "r/#", "a\x00b", []byte("y"))
	f.Fuzz(func(t *testing.T, topic, qos, retain, user, corr, format, expiry, empty, resp, ctype string, body []byte) {
		x := &client.MessageExt{Message: client.Message{Topic: "T", Body: body, Properties: map[string]string{
			PropTopic: topic, PropQoS: qos, PropRetain: retain, PropUserProperties: user, PropCorrelationData: corr,
			PropPayloadFormat: format, PropExpiryAt: expiry, PropEmptyPayload: empty, PropResponseTopic: resp,
			PropContentType: ctype}}}
		m := fromBroker(x)
		if m.QoS > 2 || m.Topic == "" {
			t.Fatalf("bad message %+v", m)
		}
		if !packets.ValidTopicName(m.Topic) {
			return // not delivered
		}
		if !m.Expiry.IsZero() && time.Until(m.Expiry) > maxExpiry {
			t.Fatalf("expiry %v past what MQTT 5 can carry", m.Expiry)
		}
		p := packets.Publish{QoS: 1, PacketID: 1, Topic: m.Topic, Payload: m.Payload}
		pr := &p.Properties
		if m.ResponseTopic != "" {
			pr.Present.Add(packets.PropResponseTopic)
			pr.ResponseTopic = m.ResponseTopic
		}
		if m.ContentType != "" {
			pr.Present.Add(packets.PropContentType)
			pr.ContentType = m.ContentType
		}
		if m.CorrelationData != nil {
			pr.Present.Add(packets.PropCorrelationData)
			pr.CorrelationData = m.CorrelationData
		}
		pr.User = m.User
		if _, err := packets.AppendPublish(nil, &p, packets.Version5); err != nil {
			t.Fatalf("not encodable: %v (%+v)", err, m)
		}
		for _, u := range m.User {
			if !mqttString(u.Key) || !mqttString(u.Value) {
				t.Fatalf("user property %q=%q is no MQTT string", u.Key, u.Value)
			}
		}
		if !mqttString(m.ContentType) {
			t.Fatalf("content type %q is no MQTT string", m.ContentType)
		}
	})
}

// TestBridgeTakeoverRecordBytes pins the JSON of the takeover records
// (doc.go, Takeover): a connect request, a clean-start announcement and a
// handoff.
func TestBridgeTakeoverRecordBytes(t *testing.T) {
	for _, c := range []struct {
		rec  *sessionRecord
		want string
	}{
		{&sessionRecord{ClientID: "d", Node: "n", Connect: true, vouch: true, tailOnly: true},
			`{"clientId":"d","node":"n","connect":true,"expiryMs":0}`},
		{&sessionRecord{ClientID: "d", Node: "n", Connect: true, Deleted: true},
			`{"clientId":"d","node":"n","deleted":true,"connect":true,"expiryMs":0}`},
		{&sessionRecord{ClientID: "d", Node: "n", Gen: 18, ExpiryMs: 1000, DisconnectedAt: 5},
			`{"clientId":"d","node":"n","gen":18,"expiryMs":1000,"disconnectedAtMs":5}`},
		{&sessionRecord{ClientID: "d", Node: "n", Since: 7, ExpiryMs: 1000, DisconnectedAt: 5},
			`{"clientId":"d","node":"n","since":7,"expiryMs":1000,"disconnectedAtMs":5}`},
	} {
		b, err := json.Marshal(c.rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("record\n got %s\nwant %s", b, c.want)
		}
	}
}

// TestBridgeShareGroupName pins the consumer group names of shared
// subscriptions (doc.go, Shared subscriptions).
func TestBridgeShareGroupName(t *testing.T) {
	for share, want := range map[string]string{
		"$share/g/jobs/#": "MQTT_SHARE_g_",
		"$share/a.b c/x":  "MQTT_SHARE_a_b_c_",
		"$share/" + strings.Repeat("z", 40) + "/x": "MQTT_SHARE_" + strings.Repeat("z", 32) + "_",
	} {
		got := shareGroup(share)
		if !strings.HasPrefix(got, want) || len(got) != len(want)+16 {
			t.Errorf("%s: %s, want %s<16 hex>", share, got, want)
		}
		if !topicRE.MatchString(got) {
			t.Errorf("%s: %s is not a valid name", share, got)
		}
	}
	if got := shareGroup("$share/g/jobs/#"); got != "MQTT_SHARE_g_8cb902fd2e773d0f" {
		t.Errorf("name %s", got)
	}
	if shareGroup("$share/g/a") == shareGroup("$share/g/b") {
		t.Error("two shared subscriptions share a consumer group")
	}
}

// TestBridgeUnencodableIsUnstorable: a message the broker's properties
// cannot carry is refused with ErrUnencodable, which is mqtt.ErrUnstorable
// too: the mqtt server drops a will refused so instead of keeping it to
// try again for as long as it runs (before, it was kept and tried every
// 30 s, one per connection that ended: memory a client could grow).
func TestBridgeUnencodableIsUnstorable(t *testing.T) {
	for _, m := range []*mqtt.Message{{Topic: "will/\x01"}, {Topic: "t", ContentType: "a\x02"}, {Topic: "t", ClientID: "c\x01"}} {
		_, err := EncodeMessage(m, "T")
		if !errors.Is(err, ErrUnencodable) || !errors.Is(err, mqtt.ErrUnstorable) {
			t.Fatalf("%+v: %v; want ErrUnencodable and mqtt.ErrUnstorable", m, err)
		}
	}
}

// TestBridgePreparedRecordBytes pins the JSON of a prepared record with
// its owner's tag (doc.go), and reads one an earlier version wrote (no
// tag: never replaced by a tag).
func TestBridgePreparedRecordBytes(t *testing.T) {
	rec := &sessionRecord{ClientID: "dev1", Node: "n1", Subscriptions: subRecords([]mqtt.Subscription{{Filter: "devices/dev1/messages/devicebound/#", QoS: 1}}),
		ExpiryMs: 86400000, DisconnectedAt: 1763800000000, Prepared: "638712345678901234"}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"clientId":"dev1","node":"n1","subscriptions":[{"filter":"devices/dev1/messages/devicebound/#","qos":1}],` +
		`"expiryMs":86400000,"disconnectedAtMs":1763800000000,"prepared":"638712345678901234"}`
	if string(b) != want {
		t.Fatalf("record\n got %s\nwant %s", b, want)
	}
	back, err := decodeSessionRecord(b)
	if err != nil || back.Prepared != rec.Prepared || !leftAt(back).IsZero() {
		t.Fatalf("decoded %+v %v", back, err)
	}
	old, err := decodeSessionRecord([]byte(`{"clientId":"dev1","node":"n1","subscriptions":[{"filter":"devices/dev1/messages/devicebound/#","qos":1}],` +
		`"expiryMs":86400000,"disconnectedAtMs":1763800000000}`))
	if err != nil || old.Prepared != "" || !leftAt(old).IsZero() {
		t.Fatalf("an earlier version's prepared record: %+v %v", old, err)
	}
}

// TestBridgeOwnerRecordBytes pins the "owner" field of a connection's
// records (SetOwnerTag), and how a prepare judges an offline record with
// and without it: by the tag when it has one, whatever its user name and
// end time; an earlier version's record (none) by Replacer.Left, and only
// when it names a user.
func TestBridgeOwnerRecordBytes(t *testing.T) {
	rec := &sessionRecord{ClientID: "dev1", Node: "n1", Subscriptions: subRecords([]mqtt.Subscription{{Filter: "devices/dev1/messages/devicebound/#", QoS: 1}}),
		ExpiryMs: 86400000, DisconnectedAt: 1763800000000, Owner: "638712345678901234"}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"clientId":"dev1","node":"n1","subscriptions":[{"filter":"devices/dev1/messages/devicebound/#","qos":1}],` +
		`"expiryMs":86400000,"disconnectedAtMs":1763800000000,"owner":"638712345678901234"}`
	if string(b) != want {
		t.Fatalf("record\n got %s\nwant %s", b, want)
	}
	back, err := decodeSessionRecord(b)
	if err != nil || back.Owner != rec.Owner {
		t.Fatalf("decoded %+v %v", back, err)
	}
	lefts := 0
	r := &Replacer{Left: func(time.Time) bool { lefts++; return true }}
	tag := func(s string) func() string { return func() string { return s } }
	for _, tc := range []struct {
		name    string
		rec     *sessionRecord
		tag     string
		earlier bool
	}{
		{"another owner", back, "638799999999999999", true},
		{"the same owner", back, "638712345678901234", false},
		{"owner unknown now", back, "", false},
		{"online", &sessionRecord{ClientID: "dev1", Online: true, Owner: "1"}, "2", false},
		{"prepared", &sessionRecord{ClientID: "dev1", DisconnectedAt: 1, Prepared: "1"}, "2", false},
	} {
		if got := earlierOwner(tc.rec, r, tag(tc.tag)); got != tc.earlier {
			t.Errorf("%s: earlier owner %v, want %v", tc.name, got, tc.earlier)
		}
	}
	if lefts != 0 {
		t.Fatalf("Left asked %d times of records naming their owner", lefts)
	}
	// An earlier version's record of a connection: judged by Left when it
	// names a user; without one it looks like an earlier version's
	// prepared record and is kept.
	old, err := decodeSessionRecord([]byte(`{"clientId":"dev1","node":"n1","username":"u","expiryMs":86400000,"disconnectedAtMs":1763800000000}`))
	if err != nil || old.Owner != "" || !earlierOwner(old, r, tag("2")) || lefts != 1 {
		t.Fatalf("an earlier version's record: %+v %v (Left asked %d)", old, err, lefts)
	}
	old.Username = ""
	if earlierOwner(old, r, tag("2")) || lefts != 1 {
		t.Fatalf("an earlier version's record without a user name judged (Left asked %d)", lefts)
	}
}

// TestBridgeCopyRecordBytes pins a compaction copy (compact.go): a
// session record with "refreshOf", a retained record with
// MQTT_REFRESH_OF.
func TestBridgeCopyRecordBytes(t *testing.T) {
	origin := int64(17)
	rec := &sessionRecord{ClientID: "dev1", Node: "n1", ExpiryMs: 3600000, DisconnectedAt: 1763800000000, RefreshOf: &origin}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"clientId":"dev1","node":"n1","expiryMs":3600000,"disconnectedAtMs":1763800000000,"refreshOf":17}`; string(b) != want {
		t.Fatalf("copy\n got %s\nwant %s", b, want)
	}
	zero := int64(0)
	rec.RefreshOf = &zero
	if b, _ := json.Marshal(rec); !strings.Contains(string(b), `"refreshOf":0}`) {
		t.Fatalf("a copy of the record at offset 0 lost its origin: %s", b)
	}
	x := &client.MessageExt{QueueOffset: 40, Message: client.Message{Properties: map[string]string{PropRefreshOf: "17"}}}
	if o := refreshOrigin(x); o != 17 {
		t.Fatalf("retained copy's origin %d, want 17", o)
	}
	for _, bad := range []string{"40", "41", "-1", "x"} {
		x.Properties[PropRefreshOf] = bad
		if o := refreshOrigin(x); o != 40 {
			t.Fatalf("MQTT_REFRESH_OF %q: origin %d, want the record's own offset", bad, o)
		}
	}
}
