package broker

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Requests of RocketMQ 5 Java clients and admin tools beyond what 4.9.8
// sends, asked as they write them (javaInvoke).

// RocketMQ 5.2's SEARCH_OFFSET_BY_TIMESTAMP carries boundaryType (the
// enum's name, "LOWER" or "UPPER"): DefaultMQAdminExt's
// searchUpperBoundaryOffset asks for the last offset stored at or before
// the time, which SmartGo answered as the lower boundary (the first
// stored at or after it), one message or more after.
func TestBrokerSearchOffsetBoundaryType(t *testing.T) {
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Now = clk.now })
	c := newTestClient(t, b.Addr())
	t0 := clk.now().UnixMilli()
	// Offsets 0-2 at t0, 3 at t0+1s, 4 at t0+3s.
	for i, step := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
		clk.advance(step)
		c.mustSend("Bound", 0, "m"+itoa(i), "")
	}
	waitDispatched(t, b, "Bound", 0, 5)
	search := func(ts int64, boundary string) int64 {
		t.Helper()
		fields := map[string]string{"topic": "Bound", "queueId": "0", "timestamp": strconv.FormatInt(ts, 10), "bname": "broker-t"}
		if boundary != "" {
			fields["boundaryType"] = boundary
		}
		resp := javaInvoke(t, b.Addr(), protocol.SearchOffsetByTimestamp, fields, nil)
		var oh protocol.OffsetResponseHeader
		if resp.Code != protocol.Success || resp.DecodeHeader(&oh) != nil {
			t.Fatalf("search %d %s: %d %s", ts, boundary, resp.Code, resp.Remark)
		}
		return oh.Offset
	}
	for _, tc := range []struct {
		ts           int64
		lower, upper int64
	}{
		{t0 - 1, 0, 0},        // before every message: the first offset both ways
		{t0, 0, 2},            // three messages at t0: the first and the last of them
		{t0 + 500, 3, 2},      // none at the time: the one after and the one before
		{t0 + 1000, 3, 3},     // one message at the time
		{t0 + 3000, 4, 4},     // the last message
		{t0 + 9000, 5, 4},     // after every message: the end, the last message
		{math.MaxInt64, 5, 4}, // no overflow
	} {
		for _, lower := range []string{"", "LOWER", "lower"} {
			if got := search(tc.ts, lower); got != tc.lower {
				t.Errorf("lower boundary (%q) at t0%+d: %d, want %d", lower, tc.ts-t0, got, tc.lower)
			}
		}
		for _, upper := range []string{"UPPER", "upper"} {
			if got := search(tc.ts, upper); got != tc.upper {
				t.Errorf("upper boundary (%q) at t0%+d: %d, want %d", upper, tc.ts-t0, got, tc.upper)
			}
		}
	}
	// An unknown queue: 0 both ways, as before.
	resp := javaInvoke(t, b.Addr(), protocol.SearchOffsetByTimestamp, map[string]string{
		"topic": "Bound", "queueId": "3", "timestamp": strconv.FormatInt(t0, 10), "boundaryType": "UPPER"}, nil)
	var oh protocol.OffsetResponseHeader
	if resp.Code != protocol.Success || resp.DecodeHeader(&oh) != nil || oh.Offset != 0 {
		t.Fatalf("upper boundary of an unknown queue: %d %s %d", resp.Code, resp.Remark, oh.Offset)
	}
}

// RocketMQ 5's mqadmin clusterList reads two keys of GET_BROKER_RUNTIME_INFO
// a 4.9 broker does not write: getTransferredTps (4.9's getTransferedTps,
// spelled right) for the OutTPS column and brokerActive for "Activated".
// Without them it printed every SmartGo broker with an OutTPS of 0 and as
// not activated (Boolean.parseBoolean(null)).
func TestBrokerRuntimeInfoRocketMQ5ClusterList(t *testing.T) {
	for _, tc := range []struct {
		role   Role
		id     int64
		active string
	}{{RoleAsyncMaster, 0, "true"}, {RoleSlave, 1, "false"}} {
		b := testBroker(t, t.TempDir(), func(o *Options) { o.Role, o.BrokerID = tc.role, tc.id })
		kv := decodeBody[protocol.KVTable](t, javaInvoke(t, b.Addr(), protocol.GetBrokerRuntimeInfo, nil, nil)).Table
		if kv["brokerActive"] != tc.active {
			t.Errorf("%v: brokerActive=%q, want %s", tc.role, kv["brokerActive"], tc.active)
		}
		tps := strings.Split(kv["getTransferredTps"], " ")
		if _, err := strconv.ParseFloat(tps[0], 64); err != nil || len(tps) != 3 {
			t.Errorf("%v: getTransferredTps=%q: clusterList cannot read it", tc.role, kv["getTransferredTps"])
		}
		if kv["getTransferedTps"] == "" {
			t.Errorf("%v: 4.9's getTransferedTps is gone", tc.role)
		}
	}
}

// RocketMQ 5's mqadmin consumerProgress prints a queue's in-flight messages
// as OffsetWrapper.pullOffset - consumerOffset from GET_CONSUME_STATS; a
// table without pullOffset printed minus the committed offset on every
// queue (and in the total). A 5.x broker reports max(consumerOffset, the
// group's last pull offset); SmartGo records no pull offsets and reports
// the committed one.
func TestBrokerConsumeStatsPullOffset(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 5; i++ {
		c.mustSend("Inflight", 0, "m"+itoa(i), "")
	}
	waitDispatched(t, b, "Inflight", 0, 5)
	commitOffset(t, c, "ifg", "Inflight", 0, 3)
	resp := javaInvoke(t, b.Addr(), protocol.GetConsumeStats, map[string]string{"consumerGroup": "ifg", "topic": "Inflight"}, nil)
	cs := decodeBody[protocol.ConsumeStats](t, resp)
	if len(cs.OffsetTable) == 0 || strings.Count(string(resp.Body), `"pullOffset":`) != len(cs.OffsetTable) {
		t.Fatalf("pullOffset missing from a queue: %s", resp.Body)
	}
	for _, e := range cs.OffsetTable {
		w := e.Value
		if inflight := w.PullOffset - w.ConsumerOffset; inflight != 0 {
			t.Errorf("queue %d: consumerProgress prints %d in flight (pull %d, consumer %d)", e.Queue.QueueID, inflight, w.PullOffset, w.ConsumerOffset)
		}
		if e.Queue.QueueID == 0 && (w.ConsumerOffset != 3 || w.BrokerOffset != 5) {
			t.Errorf("queue 0: %+v", *w)
		}
	}
}

// RocketMQ 5's mqadmin resetOffsetByTime -b ADDR -q QUEUE [-o OFFSET]
// commits the one queue's offset (15) and then asks INVOKE_BROKER_TO_RESET_OFFSET
// with timestamp 0, isForce false, queueId and offset. SmartGo read neither
// queueId nor offset: it reset every queue of the topic to its offset at
// time 0, the start, rewinding a group with clients online on every queue
// (and refused with CONSUMER_NOT_ONLINE when none was, mqadmin reporting a
// failure after its commit). Only the named queue moves now, online or not.
func TestBrokerResetOffsetOneQueue(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for q := int32(0); q < 2; q++ {
		for i := 0; i < 5; i++ {
			c.mustSend("ResetQ", q, "m"+itoa(i), "")
		}
		waitDispatched(t, b, "ResetQ", q, 5)
	}
	reset := func(group string, fields map[string]string) *protocol.Command {
		f := map[string]string{"topic": "ResetQ", "group": group, "timestamp": "0", "isForce": "false"}
		for k, v := range fields {
			f[k] = v
		}
		return javaInvoke(t, b.Addr(), protocol.InvokeBrokerToResetOffset, f, nil)
	}
	offsets := func(group string) [2]int64 {
		var out [2]int64
		for q := range out {
			out[q], _ = b.Offsets().Query(group, "ResetQ", int32(q))
		}
		return out
	}

	oc := newOnlineConsumer(t, b, "10.0.0.5@q", "qg", map[string]string{"ResetQ": "*"})
	commitOffset(t, c, "qg", "ResetQ", 0, 4)
	commitOffset(t, c, "qg", "ResetQ", 1, 4)
	body := decodeBody[protocol.ResetOffsetBody](t, reset("qg", map[string]string{"queueId": "1", "offset": "2"}))
	if len(body.OffsetTable) != 1 || body.OffsetTable[0].Queue.QueueID != 1 || body.OffsetTable[0].Value != 2 {
		t.Fatalf("reset table %+v", body.OffsetTable)
	}
	if got := offsets("qg"); got != [2]int64{4, 2} {
		t.Fatalf("offsets after resetting queue 1 to 2: %v, want [4 2]", got)
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return len(oc.received(protocol.ResetConsumerClientOffset)) == 1 })
	var nb protocol.ResetOffsetBody
	if err := protocol.DecodeJSON(oc.received(protocol.ResetConsumerClientOffset)[0].Body, &nb); err != nil ||
		len(nb.OffsetTable) != 1 || nb.OffsetTable[0].Queue.QueueID != 1 || nb.OffsetTable[0].Value != 2 {
		t.Fatalf("client told %+v (%v)", nb.OffsetTable, err)
	}
	// An offset outside the queue is refused and moves nothing.
	if resp := reset("qg", map[string]string{"queueId": "0", "offset": "9"}); resp.Code != protocol.SystemError ||
		!strings.Contains(resp.Remark, "[0-5]") {
		t.Fatalf("offset 9 of a queue of 5: %d %s", resp.Code, resp.Remark)
	}
	if resp := reset("qg", map[string]string{"queueId": "7", "offset": "1"}); resp.Code != protocol.SystemError {
		t.Fatalf("queue 7, beyond the topic's queues: %d %s", resp.Code, resp.Remark)
	}
	if got := offsets("qg"); got != [2]int64{4, 2} {
		t.Fatalf("offsets after refused resets: %v", got)
	}
	// Without an offset (or -1), the queue's offset at the time.
	decodeBody[protocol.ResetOffsetBody](t, reset("qg", map[string]string{"queueId": "0", "offset": "-1", "timestamp": "-1"}))
	if got := offsets("qg"); got != [2]int64{5, 2} {
		t.Fatalf("offsets after resetting queue 0 to its end: %v", got)
	}
	// No client online: done all the same.
	commitOffset(t, c, "idle", "ResetQ", 0, 5)
	commitOffset(t, c, "idle", "ResetQ", 1, 5)
	decodeBody[protocol.ResetOffsetBody](t, reset("idle", map[string]string{"queueId": "0", "offset": "1"}))
	if got := offsets("idle"); got != [2]int64{1, 5} {
		t.Fatalf("offsets of a group offline: %v, want [1 5]", got)
	}
}
