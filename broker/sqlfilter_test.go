package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// sqlPull pulls with the subscription in the request (flag 0x4) as SQL92.
func (tc *testClient) sqlPull(group, topic string, queueID int32, offset int64, expr string, suspend time.Duration) (*protocol.Command, pullResult) {
	tc.t.Helper()
	flag := int32(pullFlagSubscription)
	if suspend > 0 {
		flag |= pullFlagSuspend
	}
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: queueID, QueueOffset: offset,
		MaxMsgNums: 32, SysFlag: flag, SuspendTimeoutMillis: suspend.Milliseconds(), Subscription: expr, ExpressionType: protocol.ExpressionTypeSQL92}
	resp := tc.invoke(protocol.PullMessage, h, nil)
	r := pullResult{code: resp.Code}
	if resp.Code == protocol.Success || resp.Code == protocol.PullNotFound || resp.Code == protocol.PullRetryImmediately {
		if err := resp.DecodeHeader(&r.hdr); err != nil {
			tc.t.Fatal(err)
		}
	}
	for body := resp.Body; len(body) > 0; {
		m, n, err := record.Decode(body, true)
		if err != nil {
			tc.t.Fatal(err)
		}
		r.msgs = append(r.msgs, m)
		body = body[n:]
	}
	return resp, r
}

// drain pulls queue 0 of topic to its end with pull and returns the bodies.
func drain(t *testing.T, pull func(offset int64) pullResult) []string {
	t.Helper()
	var bodies []string
	for off := int64(0); ; {
		r := pull(off)
		switch r.code {
		case protocol.Success, protocol.PullRetryImmediately:
		case protocol.PullNotFound:
			return bodies
		default:
			t.Fatalf("pull at %d: code %d", off, r.code)
		}
		for _, m := range r.msgs {
			bodies = append(bodies, string(m.Body))
		}
		if r.hdr.NextBeginOffset <= off {
			t.Fatalf("pull at %d did not advance (%d)", off, r.hdr.NextBeginOffset)
		}
		off = r.hdr.NextBeginOffset
	}
}

// sendSQLFixture sends 100 messages to queue 0 of topic: a = i, region
// eu for even i and us for odd, tag TagA for i%10 == 0, TagB otherwise.
func sendSQLFixture(c *testClient, topic string) {
	for i := 0; i < 100; i++ {
		region, tag := "us", "TagB"
		if i%2 == 0 {
			region = "eu"
		}
		if i%10 == 0 {
			tag = "TagA"
		}
		c.mustSend(topic, 0, "m"+itoa(i), props(record.PropertyTags, tag, "a", itoa(i), "region", region))
	}
}

func TestBrokerSQL92PullFilters(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.EnablePropertyFilter = true })
	c := newTestClient(t, b.Addr())
	sendSQLFixture(c, "Sql")
	waitDispatched(t, b, "Sql", 0, 100)
	cases := map[string]string{
		"a >= 94 AND region = 'eu'":                        "m94 m96 m98",
		"TAGS = 'TagA' AND a BETWEEN 20 AND 50":            "m20 m30 m40 m50",
		"TAGS IN ('TagA') AND region IN ('us')":            "",
		"a < 3 OR a > 97":                                  "m0 m1 m2 m98 m99",
		"missing IS NOT NULL":                              "",
		"NOT (a <> 7)":                                     "m7",
		"(region = 'us' AND a > 95) OR TAGS = 'x'":         "m97 m99",
		"TAGS IS NOT NULL AND a NOT BETWEEN 3 AND 99":      "m0 m1 m2",
		"region = 'eu' AND a = 4 AND TAGS <> 'TagA'":       "m4",
		"TAGS = 'TagB' AND TAGS = 'TagA'":                  "",
		"a > 90 AND a NOT IN ('x') AND region IS NOT NULL": "m91 m92 m93 m94 m95 m96 m97 m98 m99",
	}
	for expr, want := range cases {
		got := drain(t, func(off int64) pullResult {
			_, r := c.sqlPull("cg-sql", "Sql", 0, off, expr, 0)
			return r
		})
		if strings.Join(got, " ") != want {
			t.Errorf("%q: got %v, want %s", expr, got, want)
		}
	}
	// A malformed selector in the request: SUBSCRIPTION_PARSE_FAILED.
	resp, _ := c.sqlPull("cg-sql", "Sql", 0, 0, "a >", 0)
	if resp.Code != protocol.SubscriptionParseFailed || !strings.Contains(resp.Remark, "SQL92") {
		t.Fatalf("bad selector: %d %q", resp.Code, resp.Remark)
	}
	// Tag subscriptions are unaffected.
	if r := c.pull("cg-sql", "Sql", 0, 0, flagSubscription, 0, "TagA"); r.code != protocol.Success || len(r.msgs) != 10 {
		t.Fatalf("tag pull: %d, %d msgs", r.code, len(r.msgs))
	}
}

// sqlHeartbeat sends a consumer heartbeat with the given subscriptions
// (topic -> SQL92 selector) and returns the response.
func (tc *testClient) sqlHeartbeat(clientID, group string, subs map[string]string) *protocol.Command {
	tc.t.Helper()
	cd := &protocol.ConsumerData{GroupName: group, ConsumeType: protocol.ConsumePassively, MessageModel: protocol.MessageModelClustering,
		ConsumeFromWhere: protocol.ConsumeFromFirstOffset}
	for topic, expr := range subs {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, &protocol.SubscriptionData{Topic: topic, SubString: expr,
			ExpressionType: protocol.ExpressionTypeSQL92, SubVersion: 1, TagsSet: []string{}, CodeSet: []int32{}})
	}
	body, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []*protocol.ConsumerData{cd}})
	if err != nil {
		tc.t.Fatal(err)
	}
	return tc.invoke(protocol.HeartBeat, nil, body)
}

// A SQL92 subscription registered by heartbeat filters pulls that do not
// carry it (the Java and Go clients' default); a malformed one is refused
// at the heartbeat with a clear error, and the group's other subscription
// still works.
func TestBrokerSQL92Heartbeat(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.EnablePropertyFilter = true })
	c := newTestClient(t, b.Addr())
	sendSQLFixture(c, "SqlHB")
	c.mustSend("Other", 0, "o", "")
	waitDispatched(t, b, "SqlHB", 0, 100)
	resp := c.sqlHeartbeat("client-1", "cg-hb", map[string]string{"SqlHB": "a > 95", "Other": "region = "})
	if resp.Code != protocol.SubscriptionParseFailed || !strings.Contains(resp.Remark, "Other") {
		t.Fatalf("heartbeat with a bad selector: %d %q", resp.Code, resp.Remark)
	}
	got := drain(t, func(off int64) pullResult { return c.pull("cg-hb", "SqlHB", 0, off, 0, 0, "") })
	if strings.Join(got, " ") != "m96 m97 m98 m99" {
		t.Fatalf("heartbeat subscription pulls %v", got)
	}
	if r := c.pull("cg-hb", "Other", 0, 0, 0, 0, ""); r.code != protocol.SubscriptionNotExist {
		t.Fatalf("pull of the refused subscription: %d", r.code)
	}
	// A held pull wakes for a matching message.
	done := make(chan pullResult, 1)
	go func() {
		done <- c.pull("cg-hb", "SqlHB", 0, 100, pullFlagSuspend, 10*time.Second, "")
	}()
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return b.hold.Len() > 0 })
	c.mustSend("SqlHB", 0, "late", props("a", "1000"))
	select {
	case r := <-done:
		if r.code != protocol.Success || len(r.msgs) != 1 || string(r.msgs[0].Body) != "late" {
			t.Fatalf("held pull: %d %d msgs", r.code, len(r.msgs))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held pull not answered")
	}
}

func TestBrokerSQL92CheckClientConfig(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.EnablePropertyFilter = true })
	c := newTestClient(t, b.Addr())
	check := func(c *testClient, typ, expr string) *protocol.Command {
		body, err := protocol.EncodeJSON(protocol.CheckClientRequestBody{ClientID: "cid", Group: "g",
			SubscriptionData: &protocol.SubscriptionData{Topic: "T", SubString: expr, ExpressionType: typ}})
		if err != nil {
			t.Fatal(err)
		}
		return c.invoke(protocol.CheckClientConfig, nil, body)
	}
	if r := check(c, protocol.ExpressionTypeSQL92, "a > 1 AND b IN ('x')"); r.Code != protocol.Success {
		t.Fatalf("good selector: %d %s", r.Code, r.Remark)
	}
	if r := check(c, protocol.ExpressionTypeSQL92, "a >> 1"); r.Code != protocol.SubscriptionParseFailed || !strings.Contains(r.Remark, "offset") {
		t.Fatalf("bad selector: %d %s", r.Code, r.Remark)
	}
	if r := check(c, protocol.ExpressionTypeTag, "a >> 1"); r.Code != protocol.Success {
		t.Fatalf("tag expression: %d %s", r.Code, r.Remark)
	}
	if r := check(c, "BLOOM", "x"); r.Code != protocol.SystemError {
		t.Fatalf("unknown type: %d %s", r.Code, r.Remark)
	}
	if r := c.invoke(protocol.CheckClientConfig, nil, []byte("{not json")); r.Code != protocol.SystemError {
		t.Fatalf("bad body: %d %s", r.Code, r.Remark)
	}

	// With property filters off every SQL92 subscription is refused.
	off := testBroker(t, t.TempDir(), func(o *Options) { o.EnablePropertyFilter = false })
	oc := newTestClient(t, off.Addr())
	if r := check(oc, protocol.ExpressionTypeSQL92, "a > 1"); r.Code != protocol.SystemError || !strings.Contains(r.Remark, "enable_property_filter") {
		t.Fatalf("filters off, check: %d %s", r.Code, r.Remark)
	}
	if r := oc.sqlHeartbeat("c", "g", map[string]string{"T": "a > 1"}); r.Code != protocol.SystemError {
		t.Fatalf("filters off, heartbeat: %d %s", r.Code, r.Remark)
	}
	oc.mustSend("T", 0, "x", props("a", "5"))
	if resp, _ := oc.sqlPull("g", "T", 0, 0, "a > 1", 0); resp.Code != protocol.SystemError {
		t.Fatalf("filters off, pull: %d %s", resp.Code, resp.Remark)
	}
}
