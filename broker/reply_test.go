package broker

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// rawConn is a remoting connection driven by hand, frame by frame, as
// the Java client writes them.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// write frames a JSON header and a body: length, type 0 | header length.
func (c *rawConn) write(header string, body []byte) {
	c.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
	b = append(append(b, header...), body...)
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next frame's JSON header text, decoded command and body.
func (c *rawConn) read() (string, *protocol.Command) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var w [8]byte
	if _, err := io.ReadFull(c.r, w[:]); err != nil {
		c.t.Fatal(err)
	}
	n := binary.BigEndian.Uint32(w[:4])
	hl := binary.BigEndian.Uint32(w[4:]) & 0xFFFFFF
	rest := make([]byte, n-4)
	if _, err := io.ReadFull(c.r, rest); err != nil {
		c.t.Fatal(err)
	}
	cmd, err := protocol.DecodeFrame(append(w[4:8:8], rest...))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(rest[:hl]), cmd
}

// javaRequest is a request header as Java's 4.9.8 client writes it
// (fastjson, keys sorted).
func javaRequest(code int32, opaque int, ext map[string]string) string {
	e, _ := json.Marshal(ext) // encoding/json sorts map keys, as fastjson does
	return fmt.Sprintf(`{"code":%d,"extFields":%s,"flag":0,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":409}`,
		code, e, opaque)
}

// TestBrokerRequestReply: a requester heartbeats, a responder sends
// replies with SEND_REPLY_MESSAGE_V2 (short names) and SEND_REPLY_MESSAGE
// (long names), both framed by hand as Java's client frames them; the
// broker pushes each to the requester (PUSH_REPLY_MESSAGE_TO_CLIENT with
// every key Java's client requires) and stores it in the cluster's reply
// topic. Once the requester left, a reply gets SYSTEM_ERROR naming it and
// a log line, and the broker serves on.
func TestBrokerRequestReply(t *testing.T) {
	var logs testutil.LogBuffer
	b := testBroker(t, t.TempDir(), func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	replyTopic := "TestCluster_REPLY_TOPIC"
	tc, ok := b.topics.Get(replyTopic)
	if !ok || tc.WriteQueueNums != 1 || tc.ReadQueueNums != 1 || tc.Perm != PermRW {
		t.Fatalf("reply topic at start: %+v %v", tc, ok)
	}

	const requester = "127.0.0.1@4242#1"
	req := dialRaw(t, b.Addr())
	hb := `{"clientID":"` + requester + `","consumerDataSet":[],"producerDataSet":[{"groupName":"rpc-pg"},{"groupName":"CLIENT_INNER_PRODUCER"}]}`
	req.write(javaRequest(protocol.HeartBeat, 1, map[string]string{}), []byte(hb))
	if _, resp := req.read(); resp.Code != protocol.Success || resp.Opaque != 1 {
		t.Fatalf("heartbeat: %+v", resp)
	}

	resp := dialRaw(t, b.Addr())
	replyProps := func(corr string) string {
		return props(record.PropertyCorrelationID, corr, record.PropertyReplyToClient, requester, record.PropertyTTL, "3000",
			record.PropertyMsgType, "reply", record.PropertyUniqueClientMessageIDKeyIndex, "UNIQ-"+corr, record.PropertyWaitStoreMsgOK, "true")
	}
	now := fmt.Sprint(time.Now().UnixMilli())
	cases := []struct {
		code int32
		ext  map[string]string
	}{
		{protocol.SendReplyMessageV2, map[string]string{"a": "responder-pg", "b": replyTopic, "c": "TBW102", "d": "4", "e": "0",
			"f": "0", "g": now, "h": "0", "i": replyProps("c-1"), "j": "0", "k": "false", "m": "false", "n": "broker-t"}},
		{protocol.SendReplyMessage, map[string]string{"producerGroup": "responder-pg", "topic": replyTopic, "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "4", "queueId": "-1", "sysFlag": "0", "bornTimestamp": now, "flag": "3",
			"properties": replyProps("c-2"), "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}},
	}
	for i, c := range cases {
		body := fmt.Sprintf("answer %d", i)
		resp.write(javaRequest(c.code, 10+i, c.ext), []byte(body))
		// The requester gets the push first.
		raw, push := req.read()
		if push.Code != protocol.PushReplyMessageToClient || push.Flag != 0 || string(push.Body) != body {
			t.Fatalf("push %d: %s body %q", i, raw, push.Body)
		}
		for _, k := range []string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
			"bornTimestamp", "flag", "bornHost", "storeHost", "storeTimestamp"} {
			if push.ExtFields[k] == "" {
				t.Fatalf("push %d lacks %s: %s", i, k, raw)
			}
		}
		var ph protocol.ReplyMessageRequestHeader
		if err := push.DecodeHeader(&ph); err != nil {
			t.Fatal(err)
		}
		corr := fmt.Sprintf("c-%d", i+1)
		if ph.Topic != replyTopic || ph.ProducerGroup != "responder-pg" || ph.StoreHost != b.storeHost.String() ||
			!strings.HasPrefix(ph.BornHost, "127.0.0.1:") || ph.BornHost != resp.nc.LocalAddr().String() {
			t.Fatalf("push %d header %+v", i, ph)
		}
		if v, _ := record.LookupPropertyString(ph.Properties, record.PropertyCorrelationID); v != corr {
			t.Fatalf("push %d properties %q", i, ph.Properties)
		}
		if v, _ := record.LookupPropertyString(ph.Properties, record.PropertyPushReplyTime); v == "" {
			t.Fatalf("push %d without PUSH_REPLY_TIME: %q", i, ph.Properties)
		}
		req.write(fmt.Sprintf(`{"code":0,"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":409}`, push.Opaque), nil)
		// Then the responder its answer.
		raw, out := resp.read()
		if out.Code != protocol.Success || out.Opaque != int32(10+i) {
			t.Fatalf("reply %d: %s", i, raw)
		}
		var rh protocol.SendMessageResponseHeader
		if err := out.DecodeHeader(&rh); err != nil || rh.QueueOffset != int64(i) || rh.MsgID == "0" {
			t.Fatalf("reply %d response header %+v %v", i, rh, err)
		}
	}
	waitDispatched(t, b, replyTopic, 0, 2)
	pc := newTestClient(t, b.Addr())
	got := pc.pull("reader", replyTopic, 0, 0, flagSubscription, 0, "*")
	if got.code != protocol.Success || len(got.msgs) != 2 || string(got.msgs[1].Body) != "answer 1" || got.msgs[1].Flag != 3 {
		t.Fatalf("stored replies: code %d, %d messages", got.code, len(got.msgs))
	}
	if propOf(got.msgs[0], record.PropertyWaitStoreMsgOK) != "" || propOf(got.msgs[0], record.PropertyCorrelationID) != "c-1" {
		t.Fatalf("stored reply properties %q", got.msgs[0].Properties)
	}

	// The requester takes the push but never answers it: the responder's
	// connection is served meanwhile (its plain send is answered first),
	// and the reply is refused once the push timed out.
	resp.write(javaRequest(protocol.SendReplyMessageV2, 30, cases[0].ext), []byte("unanswered"))
	if _, push := req.read(); push.Code != protocol.PushReplyMessageToClient || string(push.Body) != "unanswered" {
		t.Fatalf("push of the unanswered reply: %+v", push)
	}
	sendV2 := map[string]string{"a": "pg", "b": "AfterReplies", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": now, "h": "0", "i": ""}
	start := time.Now()
	resp.write(javaRequest(protocol.SendMessageV2, 31, sendV2), []byte("meanwhile"))
	if raw, out := resp.read(); out.Opaque != 31 || out.Code != protocol.Success {
		t.Fatalf("send while a push waits: %s", raw)
	}
	raw, out := resp.read()
	if out.Opaque != 30 || out.Code != protocol.SystemError || !strings.Contains(out.Remark, "timed out") {
		t.Fatalf("reply whose push was not answered: %s", raw)
	}
	if d := time.Since(start); d > replyPushTimeout+10*time.Second {
		t.Fatalf("unanswered push ended after %v", d)
	}

	// The requester leaves; a late reply is refused with a reason.
	_ = req.nc.Close()
	testutil.WaitFor(t, 10*time.Second, "", func() bool { _, ok := b.producers.Find(requester); return !ok })
	resp.write(javaRequest(protocol.SendReplyMessageV2, 20, cases[0].ext), []byte("late"))
	raw, out = resp.read()
	if out.Code != protocol.SystemError || !strings.Contains(out.Remark, requester) || !strings.Contains(out.Remark, "not connected") {
		t.Fatalf("reply to a client that left: %s", raw)
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return strings.Contains(logs.String(), "reply not delivered") })
	if !strings.Contains(logs.String(), requester) {
		t.Fatalf("log line does not name the client:\n%s", logs.String())
	}
	// A reply without REPLY_TO_CLIENT says so.
	bad := map[string]string{}
	for k, v := range cases[0].ext {
		bad[k] = v
	}
	bad["i"] = props(record.PropertyCorrelationID, "c-9", record.PropertyMsgType, "reply")
	resp.write(javaRequest(protocol.SendReplyMessageV2, 21, bad), []byte("nobody"))
	if raw, out := resp.read(); out.Code != protocol.SystemError || !strings.Contains(out.Remark, record.PropertyReplyToClient) {
		t.Fatalf("reply without REPLY_TO_CLIENT: %s", raw)
	}
	// A malformed reply header.
	resp.write(javaRequest(protocol.SendReplyMessageV2, 22, map[string]string{"a": "pg"}), []byte("x"))
	if raw, out := resp.read(); out.Code != protocol.SystemError || !strings.Contains(out.Remark, "bad reply header") {
		t.Fatalf("malformed reply: %s", raw)
	}
	// Nothing else is affected.
	c := newTestClient(t, b.Addr())
	c.mustSend("AfterReplies", 0, "still here", "")
}
