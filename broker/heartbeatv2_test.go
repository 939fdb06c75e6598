package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// javaHeartbeatV2 is the body of a RocketMQ 5 Java push consumer's
// HEART_BEAT with heartbeat v2 on (-Dcom.rocketmq.heartbeat.v2=true), as
// fastjson writes it: full (with its subscription to topic's tag) or
// WithoutSub (the group without subscriptions).
func javaHeartbeatV2(clientID, group, topic, tag string, fingerprint int32, withoutSub bool) []byte {
	subs := ""
	if !withoutSub {
		subs = fmt.Sprintf(`{"classFilterMode":false,"codeSet":[%d],"expressionType":"TAG","subString":%q,"subVersion":1764300000000,"tagsSet":[%q],"topic":%q}`,
			int32(record.TagsHash(tag)), tag, tag, topic)
	}
	return fmt.Appendf(nil, `{"clientID":%q,"consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY",`+
		`"groupName":%q,"messageModel":"CLUSTERING","subscriptionDataSet":[%s],"unitMode":false}],"heartbeatFingerprint":%d,`+
		`"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":%t}`, clientID, group, subs, fingerprint, withoutSub)
}

// A RocketMQ 5 client with heartbeat v2 on sends its subscriptions only
// while the broker does not answer IS_SUPPORT_HEART_BEAT_V2=true with
// IS_SUB_CHANGE=false; then heartbeats without them, which must keep the
// client a member and its subscription in effect. A heartbeat without
// subscriptions the broker cannot stand for (a client it does not know, a
// fingerprint it did not take) answers IS_SUB_CHANGE=true, so the client
// sends them again. v1 heartbeats get no extension fields, as before.
func TestBrokerHeartbeatV2(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 4; i++ {
		c.mustSend("HB2", 0, "m"+itoa(i), props(record.PropertyTags, []string{"TagA", "TagB"}[i%2]))
	}
	waitDispatched(t, b, "HB2", 0, 4)
	heartbeat := func(body []byte) (supported, subChanged string) {
		t.Helper()
		resp := c.invoke(protocol.HeartBeat, nil, body)
		if resp.Code != protocol.Success {
			t.Fatalf("heartbeat refused: %d %s", resp.Code, resp.Remark)
		}
		f := resp.Fields()
		return f[protocol.HeartbeatV2Supported], f[protocol.HeartbeatSubChanged]
	}
	const fp = -1234567
	if s, ch := heartbeat(javaHeartbeatV2("10.0.0.9@v2", "g2", "HB2", "TagA", fp, false)); s != "true" || ch != "false" {
		t.Fatalf("full v2 heartbeat: IS_SUPPORT_HEART_BEAT_V2=%q IS_SUB_CHANGE=%q, want true, false", s, ch)
	}
	for i := 0; i < 2; i++ {
		if s, ch := heartbeat(javaHeartbeatV2("10.0.0.9@v2", "g2", "HB2", "", fp, true)); s != "true" || ch != "false" {
			t.Fatalf("heartbeat %d without subscriptions: IS_SUPPORT_HEART_BEAT_V2=%q IS_SUB_CHANGE=%q, want true, false", i, s, ch)
		}
	}
	if ids := b.consumers.ClientIDs("g2"); len(ids) != 1 || ids[0] != "10.0.0.9@v2" {
		t.Fatalf("members after heartbeats without subscriptions: %v", ids)
	}
	// The pull carries no subscription (the Java client's default): the
	// one of the full heartbeat filters.
	r := c.pull("g2", "HB2", 0, 0, 0, 0, "")
	if r.code != protocol.Success || len(r.msgs) != 2 {
		t.Fatalf("pull with the kept subscription: code %d, %d msgs, want 2 TagA", r.code, len(r.msgs))
	}
	for _, m := range r.msgs {
		if tag := propOf(m, record.PropertyTags); tag != "TagA" {
			t.Fatalf("pulled tag %s", tag)
		}
	}
	// Another fingerprint without its subscriptions: sent again, the
	// kept ones stay meanwhile.
	if _, ch := heartbeat(javaHeartbeatV2("10.0.0.9@v2", "g2", "HB2", "", fp+1, true)); ch != "true" {
		t.Fatalf("unknown fingerprint: IS_SUB_CHANGE=%q, want true", ch)
	}
	if _, ch := heartbeat(javaHeartbeatV2("10.0.0.9@v2", "g2", "HB2", "", fp, true)); ch != "true" {
		t.Fatalf("after an unknown fingerprint: IS_SUB_CHANGE=%q, want true until a full heartbeat", ch)
	}
	if r := c.pull("g2", "HB2", 0, 0, 0, 0, ""); r.code != protocol.Success || len(r.msgs) != 2 {
		t.Fatalf("pull after an unknown fingerprint: code %d, %d msgs", r.code, len(r.msgs))
	}
	// A client this broker does not know (it restarted): a member at
	// once, its subscriptions asked for.
	if _, ch := heartbeat(javaHeartbeatV2("10.0.0.9@other", "g3", "HB2", "", fp, true)); ch != "true" {
		t.Fatalf("unknown client: IS_SUB_CHANGE=%q, want true", ch)
	}
	if ids := b.consumers.ClientIDs("g3"); len(ids) != 1 {
		t.Fatalf("unknown client not a member: %v", ids)
	}
	// A v1 heartbeat (no fingerprint) is answered as before.
	body, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: "v1", ConsumerDataSet: []*protocol.ConsumerData{{GroupName: "g1",
		ConsumeType: protocol.ConsumePassively, MessageModel: protocol.MessageModelClustering}}})
	if err != nil {
		t.Fatal(err)
	}
	if s, ch := heartbeat(body); s != "" || ch != "" {
		t.Fatalf("v1 heartbeat answered with %q %q", s, ch)
	}
}

// RocketMQ 5 brokers and proxies ask QUERY_CONSUMER_OFFSET with
// setZeroIfNotFound=false: a group with no offset must get QUERY_NOT_FOUND
// even on a young queue, where a plain query gets 0.
func TestBrokerQueryOffsetSetZeroIfNotFound(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	c.mustSend("Young", 0, "m", "")
	waitDispatched(t, b, "Young", 0, 1)
	query := func(fields map[string]string) (int32, int64) {
		t.Helper()
		resp := javaInvoke(t, b.Addr(), protocol.QueryConsumerOffset, fields, nil)
		var oh protocol.OffsetResponseHeader
		if resp.Code == protocol.Success {
			if err := resp.DecodeHeader(&oh); err != nil {
				t.Fatal(err)
			}
		}
		return resp.Code, oh.Offset
	}
	base := map[string]string{"consumerGroup": "fresh", "topic": "Young", "queueId": "0"}
	with := func(v string) map[string]string {
		f := map[string]string{"setZeroIfNotFound": v}
		for k, x := range base {
			f[k] = x
		}
		return f
	}
	if code, off := query(base); code != protocol.Success || off != 0 {
		t.Fatalf("plain query: %d offset %d, want 0", code, off)
	}
	if code, off := query(with("true")); code != protocol.Success || off != 0 {
		t.Fatalf("setZeroIfNotFound=true: %d offset %d, want 0", code, off)
	}
	if code, _ := query(with("false")); code != protocol.QueryNotFound {
		t.Fatalf("setZeroIfNotFound=false: code %d, want QUERY_NOT_FOUND (%d)", code, protocol.QueryNotFound)
	}
	// A stored offset is the answer either way.
	c.invoke(protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "fresh", Topic: "Young", QueueID: 0, CommitOffset: 1}, nil)
	if code, off := query(with("false")); code != protocol.Success || off != 1 {
		t.Fatalf("stored offset with setZeroIfNotFound=false: %d offset %d, want 1", code, off)
	}
}

// Heartbeat v2 fields a client gets wrong: a fingerprint that is not a
// Java int (a quoted number is taken, as the lenient body decoder takes
// numbers everywhere), a withoutSub that is not a boolean are refused with a remark
// naming the body, and register nothing; withoutSub without a
// fingerprint is a v1 heartbeat, whose subscriptions are taken.
func TestBrokerHeartbeatV2Malformed(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	full := string(javaHeartbeatV2("10.0.0.9@bad", "gbad", "HBX", "TagA", 77, false))
	for _, tc := range []struct{ name, from, to string }{
		{"fingerprint not a number", `"heartbeatFingerprint":77`, `"heartbeatFingerprint":"x77"`},
		{"fingerprint past int32", `"heartbeatFingerprint":77`, `"heartbeatFingerprint":4294967296`},
		{"fingerprint with a fraction", `"heartbeatFingerprint":77`, `"heartbeatFingerprint":7.5`},
		{"withoutSub as a string", `"withoutSub":false`, `"withoutSub":"yes"`},
	} {
		body := strings.Replace(full, tc.from, tc.to, 1)
		if body == full {
			t.Fatalf("%s: %q not in the body", tc.name, tc.from)
		}
		resp := c.invoke(protocol.HeartBeat, nil, []byte(body))
		if resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "bad heartbeat body") {
			t.Fatalf("%s: code %d remark %q, want SystemError naming the body", tc.name, resp.Code, resp.Remark)
		}
		if ids := b.consumers.ClientIDs("gbad"); len(ids) != 0 {
			t.Fatalf("%s: registered %v", tc.name, ids)
		}
	}
	// withoutSub with fingerprint 0: a v1 heartbeat; its subscriptions
	// count and no v2 fields come back.
	c.mustSend("HBX", 0, "a", props(record.PropertyTags, "TagA"))
	c.mustSend("HBX", 0, "b", props(record.PropertyTags, "TagB"))
	waitDispatched(t, b, "HBX", 0, 2)
	v1 := strings.Replace(strings.Replace(full, `"withoutSub":false`, `"withoutSub":true`, 1), `"heartbeatFingerprint":77`, `"heartbeatFingerprint":0`, 1)
	resp := c.invoke(protocol.HeartBeat, nil, []byte(v1))
	if resp.Code != protocol.Success {
		t.Fatalf("withoutSub without a fingerprint: code %d %s", resp.Code, resp.Remark)
	}
	if f := resp.Fields(); f[protocol.HeartbeatV2Supported] != "" || f[protocol.HeartbeatSubChanged] != "" {
		t.Fatalf("v1 heartbeat answered with v2 fields %v", f)
	}
	r := c.pull("gbad", "HBX", 0, 0, 0, 0, "")
	if r.code != protocol.Success || len(r.msgs) != 1 || propOf(r.msgs[0], record.PropertyTags) != "TagA" {
		t.Fatalf("pull with the v1 heartbeat's subscription: code %d, %d msgs, want the TagA one", r.code, len(r.msgs))
	}
}
