// Package rocketmq checks SmartGo against apache/rocketmq-client-go v2.1.2.
package rocketmq

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/smartgo/smartgo/registry"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

const topic = "InteropTopic"

func startRegistry(t *testing.T) string {
	t.Helper()
	reg, err := registry.New(registry.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg.Addr().String()
}

// fakeBroker is a SmartGo remoting server that answers HEART_BEAT and
// SEND_MESSAGE like a broker would, recording what it decoded.
type fakeBroker struct {
	srv   *remoting.Server
	addr  string
	sends atomic.Int64
	last  atomic.Pointer[protocol.SendMessageRequestHeader]
	body  atomic.Pointer[[]byte]
}

func startFakeBroker(t *testing.T) *fakeBroker {
	t.Helper()
	srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBroker{srv: srv}
	srv.RegisterFunc(protocol.HeartBeat, remoting.PoolHeartbeat, func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		var hb protocol.HeartbeatData
		if err := protocol.DecodeJSON(req.Body, &hb); err != nil {
			return protocol.NewResponse(protocol.SystemError, err.Error()), nil
		}
		return protocol.NewResponse(protocol.Success, ""), nil
	})
	send := func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		h, err := protocol.DecodeSendMessageHeader(req)
		if err != nil {
			return protocol.NewResponse(protocol.MessageIllegal, err.Error()), nil
		}
		fb.last.Store(h)
		b := append([]byte(nil), req.Body...)
		fb.body.Store(&b)
		off := fb.sends.Add(1) - 1
		resp := protocol.NewResponse(protocol.Success, "")
		resp.SetHeader(&protocol.SendMessageResponseHeader{MsgID: fmt.Sprintf("7F00000100002A9F%016X", off),
			QueueID: h.QueueID, QueueOffset: off, Region: "DefaultRegion"})
		return resp, nil
	}
	srv.RegisterFunc(protocol.SendMessage, remoting.PoolSend, send)
	srv.RegisterFunc(protocol.SendMessageV2, remoting.PoolSend, send)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	fb.addr = srv.Addr().String()
	return fb
}

// registerBroker registers a broker with the registry through SmartGo's own
// remoting client.
func registerBroker(t *testing.T, c *remoting.Client, reg, name, addr string, id int64, writeQueues int32) {
	t.Helper()
	body, err := protocol.EncodeJSON(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
		DataVersion: protocol.DataVersion{Counter: 1, Timestamp: time.Now().UnixMilli()},
		TopicConfigTable: map[string]*protocol.TopicConfig{topic: {TopicName: topic, ReadQueueNums: writeQueues,
			WriteQueueNums: writeQueues, Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.TopicFilterSingleTag}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	req := protocol.NewRequest(protocol.RegisterBroker, &protocol.RegisterBrokerRequestHeader{BrokerName: name, BrokerAddr: addr,
		ClusterName: "DefaultCluster", HAServerAddr: "127.0.0.1:1", BrokerID: id}, body)
	resp, err := c.Invoke(context.Background(), reg, req)
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("register %s: %v %v", name, resp, err)
	}
}

func TestInteropRegistryRouteWithGoClient(t *testing.T) {
	rlog.SetLogLevel("error")
	reg := startRegistry(t)
	fb := startFakeBroker(t)
	rc := newRemotingClient(t)
	registerBroker(t, rc, reg, "broker-a", fb.addr, 0, 4)
	registerBroker(t, rc, reg, "broker-a", "127.0.0.1:1", 1, 4) // a slave: adds no publish queues
	// broker-b has no master, so clients publish nothing to it.
	registerBroker(t, rc, reg, "broker-b", "127.0.0.1:2", 1, 2)

	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{reg})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
	if err != nil {
		t.Fatalf("FetchPublishMessageQueues: %v", err)
	}
	var got []string
	for _, mq := range mqs {
		got = append(got, fmt.Sprintf("%s/%s/%d", mq.Topic, mq.BrokerName, mq.QueueId))
	}
	sort.Strings(got)
	want := []string{"InteropTopic/broker-a/0", "InteropTopic/broker-a/1", "InteropTopic/broker-a/2", "InteropTopic/broker-a/3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("publish queues %v, want %v", got, want)
	}

	list, err := adm.FetchAllTopicList(ctx)
	if err != nil || len(list.TopicList) != 1 || list.TopicList[0] != topic {
		t.Fatalf("FetchAllTopicList: %+v %v", list, err)
	}
	if _, err := adm.FetchPublishMessageQueues(ctx, "NoSuchTopic"); err == nil {
		t.Fatal("route of an unknown topic did not fail")
	}

	// A producer resolves the route from the registry, connects to the
	// broker address it found and sends there (code 10, long header names).
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{reg})),
		producer.WithGroupName("interop-pg"),
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	msg := primitive.NewMessage(topic, []byte("hello smartgo"))
	msg.WithTag("TagA")
	res, err := p.SendSync(ctx, msg)
	if err != nil {
		t.Fatalf("SendSync: %v", err)
	}
	if res.Status != primitive.SendOK || res.MessageQueue.BrokerName != "broker-a" || res.QueueOffset != 0 {
		t.Fatalf("send result %+v", res)
	}
	h := fb.last.Load()
	if h == nil || h.Topic != topic || h.ProducerGroup != "interop-pg" || h.DefaultTopic != protocol.DefaultTopic ||
		h.QueueID < 0 || h.QueueID > 3 || string(*fb.body.Load()) != "hello smartgo" {
		t.Fatalf("broker decoded %+v", h)
	}
	if _, _, err := net.SplitHostPort(fb.addr); err != nil {
		t.Fatal(err)
	}
}
