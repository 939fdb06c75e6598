package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/amqp/wire"
	"github.com/smartgo/smartgo/internal/testutil"
)

// amqpJSON is `admin amqp <listing> -o json`: one page per node.
type amqpJSON[T any] []struct {
	Node  string `json:"node"`
	Items []T    `json:"items"`
	Total int    `json:"total"`
	Next  string `json:"next"`
}

// `smartgo admin amqp ...` against a real standalone: the listings show
// what an AMQP client declared, published and consumed; /metrics has the
// queue's gauges; purge drops its ready messages; close sends the client
// 320 with the reason.
func TestCmdBinaryAdminAMQP(t *testing.T) {
	p := startBin(t, "standalone", "-data", t.TempDir(), "-set", "registry.listen=127.0.0.1:0", "-set", "broker.listen=127.0.0.1:0",
		"-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=", "-set", "amqp.listen=127.0.0.1:0",
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB", "-set", "metrics.listen=127.0.0.1:0")
	maddr := p.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	addr := p.waitLog(t, regexp.MustCompile(`AMQP 0-9-1 listening.* listen=(\S+)`), 60*time.Second)[1]
	reg := p.waitLog(t, regexp.MustCompile(`standalone running" registry=(\S+)`), 60*time.Second)[1]
	adm := func(args ...string) (int, string, string) {
		t.Helper()
		return runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
	}

	c := dialAMQP(t, addr, "guest", "guest")
	c.send(1, &wire.QueueDeclare{Queue: "orders", Arguments: wire.Table{"x-max-length": int32(50)}})
	c.expect(1)
	c.send(1, &wire.QueueBind{Queue: "orders", Exchange: "amq.topic", RoutingKey: "o.#"})
	c.expect(1)
	for i := range 3 {
		c.publish("amq.topic", "o.new", fmt.Sprint("order ", i))
	}
	c.send(1, &wire.BasicQos{PrefetchCount: 1})
	c.expect(1)
	c.send(1, &wire.BasicConsume{Queue: "orders", ConsumerTag: "picker"})
	c.expect(1)
	if d, ok := c.expect(1).(*wire.BasicDeliver); !ok || d.ConsumerTag != "picker" {
		t.Fatalf("want a delivery to picker, got %+v", d)
	}
	c.frame() // its header and body
	c.frame()
	me := c.nc.LocalAddr().String()

	// The node registers with its first heartbeat; until then it is not
	// listed.
	var queues amqpJSON[amqp.QueueInfo]
	testutil.WaitFor(t, 30*time.Second, "the queue listed with one unacked delivery", func() bool {
		code, out, _ := adm("-o", "json", "amqp", "queues")
		queues = nil
		return code == exitOK && json.Unmarshal([]byte(out), &queues) == nil && len(queues) == 1 &&
			len(queues[0].Items) == 1 && queues[0].Items[0].Unacked == 1
	})
	q := queues[0].Items[0]
	want := amqp.QueueInfo{VHost: "/", Name: "orders", Arguments: map[string]any{"x-max-length": float64(50)}, Ready: 2, Unacked: 1,
		ReadyBytes: 14, Consumers: 1, Published: 3, Delivered: 1}
	if fmt.Sprintf("%+v", q) != fmt.Sprintf("%+v", want) || queues[0].Total != 1 || queues[0].Node == "" {
		t.Fatalf("queues -o json:\n got %+v\nwant %+v (page %+v)", q, want, queues[0])
	}
	node := queues[0].Node
	code, out, errOut := adm("amqp", "queues", "-node", node)
	if code != exitOK || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(node)+` +/ +orders +- +2 +1 +14 +1 +3 +1 +0 +x-max-length=50 *$`).MatchString(out) {
		t.Fatalf("queues table (exit %d):\n%s%s", code, out, errOut)
	}
	if code, out, _ := adm("amqp", "exchanges", "-prefix", "amq.t"); code != exitOK ||
		!regexp.MustCompile(`(?m)^\S+ +/ +amq.topic +topic +durable +1 +- *$`).MatchString(out) || strings.Contains(out, "amq.direct") {
		t.Fatalf("exchanges -prefix amq.t (exit %d):\n%s", code, out)
	}
	var bindings amqpJSON[amqp.BindingInfo]
	if code, out, _ := adm("-o", "json", "amqp", "bindings", "-vhost", "/"); code != exitOK || json.Unmarshal([]byte(out), &bindings) != nil ||
		len(bindings) != 1 || fmt.Sprint(bindings[0].Items) != fmt.Sprint([]amqp.BindingInfo{{VHost: "/", Source: "amq.topic",
		Destination: "orders", DestinationKind: "queue", RoutingKey: "o.#"}}) {
		t.Fatalf("bindings (exit %d):\n%s", code, out)
	}
	var conns amqpJSON[amqp.ConnectionInfo]
	if code, out, _ := adm("-o", "json", "amqp", "connections"); code != exitOK || json.Unmarshal([]byte(out), &conns) != nil ||
		len(conns) != 1 || len(conns[0].Items) != 1 || conns[0].Items[0].Name != me || conns[0].Items[0].User != "guest" ||
		conns[0].Items[0].Channels != 1 || conns[0].Items[0].State != amqp.StateRunning {
		t.Fatalf("connections (exit %d), want %s:\n%s", code, me, out)
	}
	if code, out, _ := adm("amqp", "connections"); code != exitOK ||
		!regexp.MustCompile(`(?m)^\S+ +`+regexp.QuoteMeta(me)+` +guest +/ +1 +\S+ +running +`).MatchString(out) {
		t.Fatalf("connections table (exit %d):\n%s", code, out)
	}
	if code, out, _ := adm("amqp", "consumers"); code != exitOK ||
		!regexp.MustCompile(`(?m)^\S+ +/ +orders +picker +`+regexp.QuoteMeta(me)+` +1 +true +1 +1 *$`).MatchString(out) {
		t.Fatalf("consumers (exit %d):\n%s", code, out)
	}
	if code, _, errOut := adm("amqp", "queues", "-vhost", "nope"); code == exitOK || !strings.Contains(errOut, "nope") {
		t.Fatalf("an unknown vhost: exit %d, %s", code, errOut)
	}
	if m := metricsText(t, maddr); !strings.Contains(m, "\nsmartgo_amqp_queue_messages_ready{queue=\"orders\",vhost=\"/\"} 2\n") ||
		!strings.Contains(m, "\nsmartgo_amqp_queue_messages_unacked{queue=\"orders\",vhost=\"/\"} 1\n") ||
		!strings.Contains(m, "\nsmartgo_amqp_queue_consumers{queue=\"orders\",vhost=\"/\"} 1\n") ||
		!strings.Contains(m, "\nsmartgo_amqp_queue_series_omitted 0\n") {
		t.Fatalf("/metrics:\n%s", m)
	}

	if code, out, errOut := adm("amqp", "purge", "-q", "orders"); code != exitOK || !strings.Contains(out, "2 messages on node "+node) {
		t.Fatalf("purge (exit %d): %s%s", code, out, errOut)
	}
	if code, _, errOut := adm("amqp", "purge", "-q", "nope"); code == exitOK || !strings.Contains(errOut, "not found") {
		t.Fatalf("purge of a missing queue: exit %d, %s", code, errOut)
	}
	if code, out, _ := adm("-o", "json", "amqp", "queues", "-prefix", "ord"); code != exitOK || json.Unmarshal([]byte(out), &queues) != nil ||
		len(queues[0].Items) != 1 || queues[0].Items[0].Ready != 0 || queues[0].Items[0].Unacked != 1 {
		t.Fatalf("queues after the purge (exit %d):\n%s", code, out)
	}
	if code, out, errOut := adm("amqp", "close", "-c", me, "-reason", "maintenance"); code != exitOK || !strings.Contains(out, "closed on node "+node) {
		t.Fatalf("close (exit %d): %s%s", code, out, errOut)
	}
	cl, ok := c.expect(0).(*wire.ConnectionClose)
	if !ok || cl.ReplyCode != wire.ConnectionForced || cl.ReplyText != "CONNECTION_FORCED - maintenance" {
		t.Fatalf("want connection.close 320 with the reason, got %+v", cl)
	}
	c.send(0, &wire.ConnectionCloseOk{})
	testutil.WaitFor(t, 30*time.Second, "no connection left and the delivery requeued", func() bool {
		code, out, _ := adm("-o", "json", "amqp", "connections")
		_, qout, _ := adm("-o", "json", "amqp", "queues")
		conns, queues = nil, nil
		return code == exitOK && json.Unmarshal([]byte(out), &conns) == nil && len(conns) == 1 && len(conns[0].Items) == 0 &&
			json.Unmarshal([]byte(qout), &queues) == nil && len(queues) == 1 && len(queues[0].Items) == 1 && queues[0].Items[0].Ready == 1
	})
	if code, _, errOut := adm("amqp", "close", "-c", me); code == exitOK || !strings.Contains(errOut, "not found") {
		t.Fatalf("close of a gone connection: exit %d, %s", code, errOut)
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
}

// /metrics keeps the per-queue series of the largest queues only.
func TestLargestQueuesCapsTheSeries(t *testing.T) {
	var qs []amqp.QueueInfo
	for i := range 7 {
		qs = append(qs, amqp.QueueInfo{Name: fmt.Sprint("q", i), Ready: int64(i % 4), Unacked: int64(i / 4)})
	}
	keep, omitted := largestQueues(qs, 3)
	var names []string
	for _, q := range keep {
		names = append(names, q.Name)
	}
	// Sizes: q0 0, q1 1, q2 2, q3 3, q4 1, q5 2, q6 3.
	if got := strings.Join(names, ","); got != "q3,q6,q2" || omitted != 4 {
		t.Fatalf("kept %s, omitted %d", got, omitted)
	}
	if keep, omitted := largestQueues(qs[:2], 3); len(keep) != 2 || omitted != 0 {
		t.Fatalf("under the cap: %d kept, %d omitted", len(keep), omitted)
	}
}
