package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeIngressPipelinedOrder: one client bursts QoS 1 PUBLISHes
// without waiting (pipelined ingress); the PUBACKs come in order, and the
// broker holds every message once, in one queue, in publish order, with
// its MQTT properties; a subscriber gets them in order too.
func TestBridgeIngressPipelinedOrder(t *testing.T) {
	c := startCluster(t)
	br := startBridge(t, c, nil)
	subr := connected(t, addrOf(br), packets.Version5, "pipe-sub")
	subr.subscribe(1, sub("pipe/#", 1))
	pub := connected(t, addrOf(br), packets.Version5, "pipe-pub")
	const n = 300
	for i := 1; i <= n; i++ {
		p := &packets.Publish{QoS: 1, PacketID: uint16(i), Topic: "pipe/" + strconv.Itoa(i%3), Payload: []byte(strconv.Itoa(i))}
		p.Properties.User = []packets.UserProperty{{Key: "i", Value: strconv.Itoa(i)}}
		pub.send(p)
	}
	for i := 1; i <= n; i++ {
		a, ok := pub.recv().(*packets.Puback)
		if !ok || a.PacketID != uint16(i) || a.ReasonCode != 0 {
			t.Fatalf("ack %d: %+v", i, a)
		}
	}
	for i := 1; i <= n; i++ {
		p := subr.expectPublish()
		if string(p.Payload) != strconv.Itoa(i) || p.Topic != "pipe/"+strconv.Itoa(i%3) {
			t.Fatalf("subscriber message %d: %s %q", i, p.Topic, p.Payload)
		}
	}
	msgs := pollN(t, newPull(t, c, DefaultDefaultTopic), n)
	q := msgs[0].Queue
	for i, m := range msgs {
		got := fromBroker(m)
		if m.Queue != q || string(got.Payload) != strconv.Itoa(i+1) || got.ClientID != "pipe-pub" ||
			len(got.User) != 1 || got.User[0].Value != strconv.Itoa(i+1) || got.QoS != 1 {
			t.Fatalf("stored message %d: queue %v (first %v) %+v", i, m.Queue, q, got)
		}
	}
}

// TestBridgeIngressBatches drives the chains with a batch sender that
// stores each batch message by message: runs of non-retained messages of
// one topic form batches, retained ones and other topics split them, and
// every done runs once, after its store (a batch's last message first).
func TestBridgeIngressBatches(t *testing.T) {
	c := startCluster(t)
	br := startBridge(t, c, func(_ *mqtt.Options, o *Options) {
		o.Routes = []Route{{Filter: "other/#", Topic: "OTHER"}}
	})
	b := br.backend
	var mu sync.Mutex
	var batches []int
	b.sendBatch = func(ctx context.Context, msgs []*client.Message, key string) error {
		mu.Lock()
		batches = append(batches, len(msgs))
		mu.Unlock()
		for _, m := range msgs {
			if m.Properties[PropTopic] == "b/fail" {
				return errors.New("refused")
			}
		}
		for _, m := range msgs {
			if _, err := b.prod.SendOrderly(ctx, m, key, client.HashSelector); err != nil {
				return err
			}
		}
		return nil
	}
	items := []ingressItem{}
	var order []int
	errs := make([]error, 9)
	add := func(topic string, retain bool) {
		i := len(items)
		items = append(items, ingressItem{m: &mqtt.Message{Topic: topic, Payload: []byte(fmt.Sprint(i)), QoS: 1, Retain: retain, ClientID: "bat"},
			done: func(err error) { order = append(order, i); errs[i] = err }})
	}
	add("b/1", false)
	add("b/2", false)
	add("b/3", false)
	add("b/r", true)
	add("b/4", false)
	add("other/x", false)
	add("other/y", false)
	add("b/fail", false)
	add("b/5", false)
	b.storeOrdered(context.Background(), "bat", items)
	// Batches complete last message first (one write for their acks).
	if fmt.Sprint(order) != "[2 1 0 3 4 6 5 8 7]" {
		t.Fatalf("done order %v", order)
	}
	if fmt.Sprint(batches) != "[3 2 2]" {
		t.Fatalf("batches %v, want [3 2 2] (b/1-3; other/x-y; b/fail+b/5)", batches)
	}
	for i, err := range errs {
		if (err != nil) != (i >= 7) {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	msgs := pollN(t, newPull(t, c, DefaultDefaultTopic), 5)
	for i, want := range []string{"0", "1", "2", "3", "4"} {
		if got := fromBroker(msgs[i]); string(got.Payload) != want {
			t.Fatalf("stored %d: %q, want %q", i, got.Payload, want)
		}
	}
}
