package broker

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// A send's and a pull's header strings are slices of the request's
// receive buffer, valid until the request is recycled (right after the
// processor returns: protocol.Command.Recycle). With the recycled bytes
// poisoned, everything that outlives a request keeps its own copy: topics
// and groups created on first use, statistics keys, stored messages,
// answers written at the batch end, held pulls answered later, resends
// served off the reader, delayed messages and compiled SQL selectors; and
// a send's answer, written after its Command went back to the decoder
// (protocol.Command.Done), reaches its caller.
func TestBrokerHeaderStringsOutliveRecycle(t *testing.T) {
	defer protocol.SetPoisonRecycled(protocol.SetPoisonRecycled(true))
	b := testBroker(t, t.TempDir(), func(o *Options) { o.EnablePropertyFilter = true })
	tc := newTestClient(t, b.Addr())

	// A pull held on a topic that is created by its first send, answered
	// when the next send arrives.
	tc.mustSend("HeldTopic", 0, "first", "")
	held := make(chan pullResult, 1)
	go func() {
		held <- tc.pull("held-cg", "HeldTopic", 0, 1, pullFlagSuspend|pullFlagSubscription, 25*time.Second, "*")
	}()
	testutilWaitHeld(t, b, "HeldTopic", 0)

	// Sends from several connections at once, so that receive buffers are
	// recycled and read into again while earlier sends are still being
	// answered.
	const conns, per = 4, 200
	var wg sync.WaitGroup
	for c := range conns {
		cl := newTestClient(t, b.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				topic := "PoisonTopic" + itoa(c)
				p := props(record.PropertyTags, "tag"+itoa(i%3), record.PropertyKeys, "key-"+itoa(c)+"-"+itoa(i), "n", itoa(i))
				if resp := cl.send(topic, int32(i%2), topic+"/"+itoa(i), p); resp.Code != protocol.Success {
					t.Errorf("send %s %d: %d %s", topic, i, resp.Code, resp.Remark)
					return
				}
			}
		}()
	}
	tc.mustSend("HeldTopic", 0, "second", "")
	tc.mustSend("DelayTopic", 0, "later", props(record.PropertyDelayLevel, "1"))
	p := props(record.PropertyUniqueClientMessageIDKeyIndex, "0A0000010000ABCD00000000000000AA", record.PropertyDelayLevel, "1")
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "ResendTopic", DefaultTopic: AutoCreateTopicKey,
		DefaultTopicQueueNums: 4, BornTimestamp: time.Now().UnixMilli(), Properties: p}
	req := protocol.NewRequest(protocol.SendMessageV2, h.V2(), []byte("resent"))
	req.ExtFields[protocol.SendResendField] = "true"
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	if resp, err := tc.c.Invoke(ctx, tc.addr, req); err != nil || resp.Code != protocol.Success {
		t.Fatalf("resend: %v %v", resp, err)
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Woken by the send, well before its hold would time out (then it
	// would be answered even if the send's notice missed it).
	var r pullResult
	select {
	case r = <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("the held pull was not woken by the send")
	}
	if r.code != protocol.Success || len(r.msgs) != 1 || r.msgs[0].Topic != "HeldTopic" || string(r.msgs[0].Body) != "second" {
		t.Fatalf("held pull: code %d, %d msgs %v", r.code, len(r.msgs), r.msgs)
	}
	for c := range conns {
		topic := "PoisonTopic" + itoa(c)
		for q := range int32(2) {
			waitDispatched(t, b, topic, q, per/2)
			var got []*record.Message
			for off := int64(0); off < per/2; {
				r := tc.pull("poison-cg", topic, q, off, pullFlagSubscription, 0, "*")
				if r.code != protocol.Success || len(r.msgs) == 0 {
					t.Fatalf("pull %s:%d at %d: code %d", topic, q, off, r.code)
				}
				got = append(got, r.msgs...)
				off = r.hdr.NextBeginOffset
			}
			for j, m := range got {
				i := 2*j + int(q)
				if m.Topic != topic || string(m.Body) != topic+"/"+itoa(i) || propOf(m, "n") != itoa(i) ||
					propOf(m, record.PropertyTags) != "tag"+itoa(i%3) || propOf(m, record.PropertyKeys) != "key-"+itoa(c)+"-"+itoa(i) {
					t.Fatalf("stored %s:%d #%d: topic %q body %q properties %q", topic, q, j, m.Topic, m.Body, m.Properties)
				}
			}
		}
		if s, ok := b.Stats().Get(TopicPutNums, topic); !ok || s.Total != per {
			t.Fatalf("put statistics of %s: %+v %v", topic, s, ok)
		}
		if s, ok := b.Stats().Get(GroupGetNums, topic+"@poison-cg"); !ok || s.Total != per {
			t.Fatalf("get statistics of %s: %+v %v", topic, s, ok)
		}
	}

	// A SQL92 selector compiled for one pull serves the next ones.
	sendSQLFixture(tc, "SQLTopic")
	for range 2 {
		_, r := tc.sqlPull("sql-cg", "SQLTopic", 0, 0, "region = 'eu' AND TAGS = 'TagA'", 0)
		if len(r.msgs) != 10 {
			t.Fatalf("SQL pull: %d msgs", len(r.msgs))
		}
		for _, m := range r.msgs {
			if propOf(m, "region") != "eu" || propOf(m, record.PropertyTags) != "TagA" {
				t.Fatalf("SQL pull returned %q", m.Properties)
			}
		}
	}

	names := b.Topics().Names()
	for _, want := range []string{"HeldTopic", "DelayTopic", "ResendTopic", "SQLTopic", "PoisonTopic0", "PoisonTopic3"} {
		if _, ok := slices.BinarySearch(names, want); !ok {
			t.Fatalf("topic %s missing from %q", want, names)
		}
	}
	if g := b.groups.Names(); !slices.Contains(g, "poison-cg") || !slices.Contains(g, "held-cg") {
		t.Fatalf("groups %q", g)
	}
	waitDispatched(t, b, "DelayTopic", 0, 1)
	r = tc.pull("delay-cg", "DelayTopic", 0, 0, pullFlagSubscription, 0, "*")
	if r.code != protocol.Success || len(r.msgs) != 1 || string(r.msgs[0].Body) != "later" {
		t.Fatalf("delayed message: code %d %v", r.code, r.msgs)
	}
	waitDispatched(t, b, "ResendTopic", 0, 1)
}

// testutilWaitHeld waits until a pull is held on (topic, queueID).
func testutilWaitHeld(t *testing.T, b *Broker, topic string, queueID int32) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, "a held pull", func() bool {
		b.hold.mu.Lock()
		defer b.hold.mu.Unlock()
		return len(b.hold.byQueue[queueKey{topic, queueID}]) > 0
	})
}
