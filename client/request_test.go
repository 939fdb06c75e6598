package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// A request through two brokers: the responder's consumer answers with
// Reply, the requester gets the reply pushed; sync and async, a
// compressed reply, a request nobody answers, and a reply whose
// requester left.
func TestClientRequestReply(t *testing.T) {
	logs := &testutil.LogBuffer{}
	c := startCluster(t, cluster.Options{Brokers: 2, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	createTopic(t, c, 2, "RpcOrders", 2)
	createTopic(t, c, 2, "RpcNobody", 1)
	ctx := testCtx(t, 90*time.Second)

	responder := newTestProducer(t, c, func(o *ProducerOptions) { o.Group = "rpc-responder"; o.CompressThreshold = 64 })
	var mu sync.Mutex
	var requests []*MessageExt
	newTestPush(t, c, "rpc-cg", "RpcOrders", "*", func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			mu.Lock()
			requests = append(requests, m)
			mu.Unlock()
			if string(m.Body) == "slow" {
				continue // never answered
			}
			body := append([]byte("re:"), m.Body...)
			if string(m.Body) == "big" {
				body = bytes.Repeat([]byte("R"), 10000) // compressed by the responder
			}
			// (A reply still in flight when the test ends is cut short:
			// the requester already has it, the push comes first.)
			if _, err := responder.Reply(ctx, m, body); err != nil && ctx.Err() == nil {
				t.Errorf("reply to %s: %v", m.Body, err)
			}
		}
		return ConsumeSuccess
	}, func(o *ConsumerOptions) { o.From = ConsumeFromFirst })

	requester := newTestProducer(t, c, func(o *ProducerOptions) { o.Group = "rpc-requester" })
	for i := range 6 {
		body := fmt.Sprintf("q%d", i)
		reply, err := requester.Request(ctx, &Message{Topic: "RpcOrders", Body: []byte(body), Properties: map[string]string{"n": body}}, 20*time.Second)
		if err != nil {
			t.Fatalf("request %s: %v", body, err)
		}
		if string(reply.Body) != "re:"+body || reply.Topic != protocol.ReplyTopic("TestCluster") {
			t.Fatalf("reply to %s: %q on %s", body, reply.Body, reply.Topic)
		}
		if reply.Property(record.PropertyReplyToClient) != requester.ClientID() || reply.Property(record.PropertyCorrelationID) == "" ||
			reply.Property(record.PropertyMsgType) != "reply" || reply.Property(record.PropertyPushReplyTime) == "" {
			t.Fatalf("reply properties %q", reply.RawProperties)
		}
	}
	// Both brokers served requests (the topic has queues on each); the
	// replies went to the reply topic of either broker and were stored.
	mu.Lock()
	brokers := map[string]bool{}
	for _, m := range requests {
		brokers[m.Queue.BrokerName] = true
		if m.Property(record.PropertyCluster) != "TestCluster" || m.Property(record.PropertyTTL) != "20000" {
			t.Errorf("request properties %q", m.RawProperties)
		}
	}
	mu.Unlock()
	if len(brokers) != 2 {
		t.Fatalf("requests reached brokers %v", brokers)
	}
	// (The broker pushes a reply before it stores it.)
	testutil.Eventually(t, 10*time.Second, func() error {
		stored := int64(0)
		for i := range 2 {
			stored += c.Broker(i).Store().MaxOffset(protocol.ReplyTopic("TestCluster"), 0)
		}
		if stored != 6 {
			return fmt.Errorf("%d replies stored in the reply topics", stored)
		}
		return nil
	})

	// A compressed reply is inflated.
	reply, err := requester.Request(ctx, &Message{Topic: "RpcOrders", Body: []byte("big")}, 20*time.Second)
	if err != nil || len(reply.Body) != 10000 || reply.Body[9999] != 'R' {
		t.Fatalf("big reply: %v", err)
	}

	// Async: the callback gets the reply.
	done := make(chan string, 1)
	if err := requester.RequestAsync(ctx, &Message{Topic: "RpcOrders", Body: []byte("async")}, 20*time.Second, func(r *MessageExt, err error) {
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(r.Body)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got != "re:async" {
			t.Fatalf("async reply %q", got)
		}
	case <-ctx.Done():
		t.Fatal("no async reply")
	}

	// Nobody answers: ErrTimeout, sync and async.
	start := time.Now()
	if _, err := requester.Request(ctx, &Message{Topic: "RpcNobody", Body: []byte("hello?")}, 300*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("unanswered request: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("unanswered request took %v", d)
	}
	if err := requester.RequestAsync(ctx, &Message{Topic: "RpcNobody", Body: []byte("hello?")}, 300*time.Millisecond, func(r *MessageExt, err error) {
		if err == nil {
			done <- "reply"
			return
		}
		done <- err.Error()
	}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !strings.Contains(got, "timed out") {
		t.Fatalf("unanswered async request: %s", got)
	}

	// Bad requests and replies.
	if _, err := requester.Request(ctx, &Message{Topic: "RpcOrders", Body: []byte("x")}, 0); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("zero timeout: %v", err)
	}
	if _, err := NewReplyMessage(&MessageExt{Message: Message{Topic: "T", Body: []byte("x")}}, []byte("y")); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("reply to a plain message: %v", err)
	}

	// The requester of an unanswered request leaves; the late reply gets
	// SYSTEM_ERROR naming the client, a log line, and the broker goes on.
	// (A new producer's first send finds the route and connects within
	// the request's 200 ms; a loaded machine can cut that send short, a
	// timeout too but of a request never stored: it is sent again.)
	leaver := newTestProducer(t, c, func(o *ProducerOptions) { o.Group = "rpc-leaver" })
	for {
		_, err := leaver.Request(ctx, &Message{Topic: "RpcOrders", Body: []byte("slow")}, 200*time.Millisecond)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("slow request: %v", err)
		}
		if strings.Contains(err.Error(), "no reply to request") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("slow request never sent: %v", err)
		}
		t.Logf("slow request not sent in time, again: %v", err)
	}
	var slow *MessageExt
	testutil.Eventually(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range requests {
			if string(m.Body) == "slow" {
				slow = m
				return nil
			}
		}
		return errors.New("slow request not received")
	})
	leaverID := leaver.ClientID()
	if err := leaver.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = responder.Reply(ctx, slow, []byte("too late"))
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != protocol.SystemError || !strings.Contains(be.Remark, leaverID) ||
		!strings.Contains(be.Remark, "not connected") {
		t.Fatalf("reply to a client that left: %v", err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "reply not delivered") {
			return errors.New("no log line about the undelivered reply")
		}
		return nil
	})
	if reply, err := requester.Request(ctx, &Message{Topic: "RpcOrders", Body: []byte("after")}, 20*time.Second); err != nil || string(reply.Body) != "re:after" {
		t.Fatalf("request after a lost reply: %v", err)
	}
}

// Close ends waiting requests with ErrClosed.
func TestClientRequestClose(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "RpcClose", 1)
	p := newTestProducer(t, c, nil)
	ctx := testCtx(t, 30*time.Second)
	got := make(chan error, 1)
	// A timeout shorter than the send still ends the request.
	if err := p.RequestAsync(ctx, &Message{Topic: "RpcClose", Body: []byte("x")}, time.Nanosecond, func(_ *MessageExt, err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrTimeout) {
		t.Fatalf("request with a 1 ns timeout: %v", err)
	}
	if err := p.RequestAsync(ctx, &Message{Topic: "RpcClose", Body: []byte("x")}, time.Minute, func(_ *MessageExt, err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending request at close: %v", err)
	}
}
