package rocketmq

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// Request-reply with rocketmq-client-go v2.1.2 (Producer.Request,
// consumer.CreateReplyMessage sent with SendSync, i.e.
// SEND_REPLY_MESSAGE 324 with long header names, and its handler of
// PUSH_REPLY_MESSAGE_TO_CLIENT) and SmartGo's SDK, each side against the
// other: Go requester and Go responder, SmartGo requester and Go
// responder, Go requester and SmartGo responder. Then the Go responder
// answers a SmartGo requester that left: the send fails with the
// broker's reason, which the broker logs, and requests go on.
func TestInteropRequestReply(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropRpc"
	createTopic(t, s.broker, topic, 2)
	ctx := context.Background()

	// The Go responder answers "re:<body>" unless the body says "sg",
	// which the SmartGo responder answers (a second consumer group).
	goReplier := newProducer(t, s, "rpc-replier")
	gate := newHandlerGate(t)
	held := make(chan *primitive.MessageExt, 1)
	newPushConsumer(t, s, "interop-rpc-go", "rpc-cons", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		if !gate.enter() {
			return consumer.ConsumeSuccess
		}
		defer gate.leave()
		body := string(m.Body)
		if strings.HasPrefix(body, "sg") {
			return consumer.ConsumeSuccess
		}
		if body == "hold" {
			held <- m
			return consumer.ConsumeSuccess
		}
		reply, err := consumer.CreateReplyMessage(m, nil)
		if err != nil {
			t.Errorf("CreateReplyMessage: %v", err)
			return consumer.ConsumeSuccess
		}
		// v2.1.2's CreateReplyMessage parses its body argument as
		// properties and leaves the body empty: set it here.
		reply.Body = []byte("re:" + body)
		// An error is possible while the requester's first heartbeat is
		// on its way (its request is then asked again).
		_, _ = goReplier.SendSync(context.Background(), reply)
		return consumer.ConsumeSuccess
	})
	sgReplier, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{s.registry}}, Group: "rpc-sg-replier"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sgReplier.Close() })
	sgCons, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: []string{s.registry}},
		Group: "interop-rpc-sg", OffsetDir: t.TempDir(), From: client.ConsumeFromFirst},
		func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				if strings.HasPrefix(string(m.Body), "sg") {
					if _, err := sgReplier.Reply(ctx, m, []byte("re:"+string(m.Body))); err != nil && ctx.Err() == nil {
						t.Errorf("SmartGo reply: %v", err)
					}
				}
			}
			return client.ConsumeSuccess
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := sgCons.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := sgCons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sgCons.Close() })

	// Go requester, Go and SmartGo responders.
	goRequester := newProducer(t, s, "rpc-requester")
	for _, body := range []string{"go-1", "go-2", "sg-1"} {
		var reply *primitive.Message
		var err error
		testutil.WaitFor(t, 60*time.Second, "a reply to "+body, func() bool {
			// The consumers may still be rebalancing: a request whose
			// reply does not come in time is asked again.
			reply, err = goRequester.Request(ctx, 5*time.Second, primitive.NewMessage(topic, []byte(body)))
			return err == nil
		})
		if string(reply.Body) != "re:"+body || reply.GetProperty(record.PropertyMsgType) != "reply" {
			t.Fatalf("Go request %s: reply %q %v", body, reply.Body, reply.GetProperties())
		}
	}

	// SmartGo requester, Go responder.
	sgRequester, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{s.registry}}, Group: "rpc-sg-requester"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sgRequester.Close() })
	r, err := sgRequester.Request(ctx, &client.Message{Topic: topic, Body: []byte("from-smartgo")}, 20*time.Second)
	if err != nil || string(r.Body) != "re:from-smartgo" || r.Topic != "DefaultCluster_REPLY_TOPIC" {
		t.Fatalf("SmartGo request answered by Go: %v", err)
	}
	// Async, through the Go client's RequestAsync.
	done := make(chan string, 1)
	if err := goRequester.RequestAsync(ctx, 20*time.Second, func(_ context.Context, m *primitive.Message, err error) {
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(m.Body)
	}, primitive.NewMessage(topic, []byte("go-async"))); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != "re:go-async" {
		t.Fatalf("Go async request: %s", got)
	}

	// A SmartGo requester leaves before the Go responder answers.
	leaver, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{s.registry}}, Group: "rpc-leaver"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaver.Request(ctx, &client.Message{Topic: topic, Body: []byte("hold")}, 300*time.Millisecond); err == nil {
		t.Fatal("held request answered")
	}
	leaverID := leaver.ClientID()
	if err := leaver.Close(); err != nil {
		t.Fatal(err)
	}
	var m *primitive.MessageExt
	select {
	case m = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("held request not received")
	}
	reply, err := consumer.CreateReplyMessage(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	reply.Body = []byte("too late")
	if _, err := goReplier.SendSync(ctx, reply); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("reply to a client that left: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "the undelivered reply in the broker log", func() bool {
		return s.logContains("reply not delivered") && s.logContains(leaverID)
	})
	r, err = sgRequester.Request(ctx, &client.Message{Topic: topic, Body: []byte("after")}, 20*time.Second)
	if err != nil || string(r.Body) != "re:after" {
		t.Fatalf("request after a lost reply: %v", err)
	}
}
