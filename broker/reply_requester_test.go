package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// TestBrokerRequestRegistersRequester: a request message (a send with
// REPLY_TO_CLIENT) registers its requester on the connection it came on,
// as a heartbeat would, so that a reply is pushed to a requester that has
// sent no heartbeat yet (rocketmq-client-go v2.1.2 sends one only every
// 30 s). A heartbeat's registration is not replaced by a request from
// another connection; a reply sent as a plain message registers nobody;
// the registration expires as a heartbeat's does and goes with its
// connection.
func TestBrokerRequestRegistersRequester(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	now := fmt.Sprint(time.Now().UnixMilli())
	send := func(c *rawConn, opaque int, props string) {
		t.Helper()
		ext := map[string]string{"a": "rpc-pg", "b": "RpcRequests", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": now, "h": "0", "i": props}
		c.write(javaRequest(protocol.SendMessageV2, opaque, ext), []byte("request"))
		if raw, out := c.read(); out.Code != protocol.Success || out.Opaque != int32(opaque) {
			t.Fatalf("request send: %s", raw)
		}
	}
	request := func(client, corr string) string {
		return props(record.PropertyCorrelationID, corr, record.PropertyReplyToClient, client, record.PropertyTTL, "3000")
	}
	responder := dialRaw(t, b.Addr())
	// reply sends the responder's reply to client and returns the answer.
	reply := func(opaque int, client, corr string) {
		ext := map[string]string{"a": "responder-pg", "b": "TestCluster_REPLY_TOPIC", "c": "TBW102", "d": "4", "e": "0", "f": "0",
			"g": now, "h": "0", "i": request(client, corr) + string(record.PropertySeparator) + props(record.PropertyMsgType, "reply")}
		responder.write(javaRequest(protocol.SendReplyMessageV2, opaque, ext), []byte("answer "+corr))
	}
	// takePush reads the push of the reply corr on c and answers it.
	takePush := func(c *rawConn, corr string) {
		t.Helper()
		raw, push := c.read()
		if push.Code != protocol.PushReplyMessageToClient || string(push.Body) != "answer "+corr {
			t.Fatalf("push of %s: %s body %q", corr, raw, push.Body)
		}
		c.write(fmt.Sprintf(`{"code":0,"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":409}`, push.Opaque), nil)
	}
	answered := func(opaque int, code protocol.ResponseCode, remark string) {
		t.Helper()
		raw, out := responder.read()
		if out.Opaque != int32(opaque) || out.Code != int32(code) || !strings.Contains(out.Remark, remark) {
			t.Fatalf("reply %d answered %s", opaque, raw)
		}
	}

	// A requester without a heartbeat: its request registers it.
	const fresh = "127.0.0.1@5001#1"
	req := dialRaw(t, b.Addr())
	send(req, 1, request(fresh, "c-1"))
	ci, ok := b.producers.Find(fresh)
	if !ok || ci.Addr != req.nc.LocalAddr().String() || ci.ClientID != fresh {
		t.Fatalf("requester after its request: %+v %v", ci, ok)
	}
	if got := b.producers.Clients("rpc-pg"); len(got) != 1 || got[0].ClientID != fresh {
		t.Fatalf("producers of rpc-pg: %+v", got)
	}
	reply(10, fresh, "c-1")
	takePush(req, "c-1")
	answered(10, protocol.Success, "")

	// A heartbeat's registration of a live connection stands: a request
	// naming the same client from another connection does not move it.
	const beating = "127.0.0.1@5002#1"
	hbConn := dialRaw(t, b.Addr())
	hb := `{"clientID":"` + beating + `","consumerDataSet":[],"producerDataSet":[{"groupName":"rpc-hb"}]}`
	hbConn.write(javaRequest(protocol.HeartBeat, 1, map[string]string{}), []byte(hb))
	if raw, resp := hbConn.read(); resp.Code != protocol.Success {
		t.Fatalf("heartbeat: %s", raw)
	}
	other := dialRaw(t, b.Addr())
	send(other, 2, request(beating, "c-2"))
	reply(11, beating, "c-2")
	takePush(hbConn, "c-2")
	answered(11, protocol.Success, "")
	if got := b.producers.Clients("rpc-pg"); len(got) != 1 {
		t.Fatalf("a request re-registered a heartbeat's client: %+v", got)
	}

	// A reply sent as a plain message (MSG_TYPE=reply) names the
	// requester, not the sender: it registers nobody.
	const absent = "127.0.0.1@5003#1"
	send(other, 3, request(absent, "c-3")+string(record.PropertySeparator)+props(record.PropertyMsgType, "reply"))
	if ci, ok := b.producers.Find(absent); ok {
		t.Fatalf("a plain reply registered its requester: %+v", ci)
	}

	// The registration expires as a heartbeat's does.
	b.producers.ScanExpired(time.Now().Add(time.Hour))
	if _, ok := b.producers.Find(fresh); ok {
		t.Fatal("requester registration did not expire")
	}
	// And goes with its connection.
	send(req, 4, request(fresh, "c-4"))
	if _, ok := b.producers.Find(fresh); !ok {
		t.Fatal("requester not registered again")
	}
	_ = req.nc.Close()
	testutil.WaitFor(t, 10*time.Second, "the requester gone with its connection", func() bool {
		_, ok := b.producers.Find(fresh)
		return !ok
	})
	reply(12, fresh, "c-4")
	answered(12, protocol.SystemError, "not connected")
}
