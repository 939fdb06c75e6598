package rocketmq

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropNoBroadcastGroupRefusesBroadcasting: a group created with
// `smartgo admin group create -no-broadcast` (consumeBroadcastEnable
// false) refuses broadcasting consumers: a SmartGo SDK broadcasting
// consumer's pulls are answered NO_PERMISSION and it is given nothing,
// and so is a rocketmq-client-go one; once they have left, a clustering
// consumer of the group gets every message. The SDK's pulls carry their
// subscription, and the broker checked the group's model only for pulls
// that do not: the SDK consumer was given every message.
func TestInteropNoBroadcastGroupRefusesBroadcasting(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropNoBroadcast"
	group := fmt.Sprintf("interop-nobc-%d", time.Now().UnixNano())
	if home, err := os.UserHomeDir(); err == nil {
		t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(home, ".rocketmq_client_go", group)) })
	}
	createTopic(t, s.broker, topic, 1)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	c := &ctlCluster{registry: s.registry}
	if out, err := c.smartgoAdmin(t, "group", "create", "-g", group, "-no-broadcast"); err != nil {
		t.Fatalf("group create: %v\n%s", err, out)
	}
	p := newProducer(t, s, "prod-nobc")
	bodies := numbered("m-", 5)
	sendBodies(t, p, topic, bodies...)

	var goBC received
	goC := startConsumerFrom(t, s, group, "cons-nobc-go", topic, consumer.BroadCasting, consumer.ConsumeFromFirstOffset, "", &goBC)
	var sgBC received
	var logs testutil.LogBuffer
	sg, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: []string{s.registry},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Group: group, Model: client.Broadcasting, OffsetDir: t.TempDir(), From: client.ConsumeFromFirst},
		func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				sgBC.add(&primitive.MessageExt{Message: primitive.Message{Topic: m.Topic, Body: m.Body}})
			}
			return client.ConsumeSuccess
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := sg.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := sg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sg.Close() })
	testutil.WaitFor(t, 30*time.Second, "the SDK consumer's pull refused", func() bool {
		return strings.Contains(logs.String(), "can not consume by broadcast way") || sgBC.distinct() > 0
	})
	if n, m := sgBC.distinct(), goBC.distinct(); n > 0 || m > 0 {
		t.Fatalf("broadcasting consumers of a group that refuses broadcasting were given messages: SDK %d, rocketmq-client-go %d", n, m)
	}
	if err := sg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := goC.Shutdown(); err != nil {
		t.Fatal(err)
	}

	var cl received
	startConsumerFrom(t, s, group, "cons-nobc-cl", topic, consumer.Clustering, consumer.ConsumeFromFirstOffset, "", &cl)
	testutil.WaitFor(t, 60*time.Second, "a clustering consumer of the group", func() bool { return cl.hasAll(bodies) })
	if n, m := sgBC.distinct(), goBC.distinct(); n > 0 || m > 0 {
		t.Fatalf("broadcasting consumers of a group that refuses broadcasting were given messages: SDK %d, rocketmq-client-go %d", n, m)
	}
}
