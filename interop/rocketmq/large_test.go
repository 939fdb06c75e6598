package rocketmq

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropLargestMessages: with the default limits, the largest
// message each client may send is stored and delivered, as on RocketMQ
// (whose broker bounds the body by maxMessageSize, 4 MiB, and leaves 64
// KiB beside it for the record's header, topic and properties):
// rocketmq-client-go sends a 4 MiB body (uncompressed), and mosquitto_pub
// (MQTT 5) a random payload filling the Maximum Packet Size the bridge
// advertises, 4 MiB. Both used to be refused: the broker counted the
// whole record against 4 MiB.
func TestInteropLargestMessages(t *testing.T) {
	s := startStandalone(t)
	for deadline := time.Now().Add(60 * time.Second); !s.logContains("standalone running"); {
		if time.Now().After(deadline) {
			t.Fatal("the bridge did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	const topic = "InteropLargest"
	body := make([]byte, 4<<20)
	_, _ = rand.Read(body)

	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		producer.WithGroupName("interop-pg-largest"), producer.WithRetry(0), producer.WithSendMsgTimeout(20*time.Second),
		producer.WithCompressMsgBodyOverHowmuch(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body))
	if err != nil {
		t.Fatalf("send a 4 MiB body: %v", err)
	}
	if res.Status != primitive.SendOK {
		t.Fatalf("send a 4 MiB body: status %d", res.Status)
	}
	var got atomic.Pointer[primitive.MessageExt]
	newPushConsumer(t, s, "interop-largest", "cons-largest", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.Store(m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "the 4 MiB message", func() bool { return got.Load() != nil })
	if !bytes.Equal(got.Load().Body, body) {
		t.Fatalf("the 4 MiB body came back as %d bytes, not equal", len(got.Load().Body))
	}

	// MQTT 5: a PUBLISH of exactly 4 MiB (fixed header 5 bytes, topic 2+7,
	// packet id 2, properties length 1).
	pub := mosquittoOrSkip(t, "mosquitto_pub")
	subBin := mosquittoOrSkip(t, "mosquitto_sub")
	host, port, _ := net.SplitHostPort(s.mqtt)
	payload := body[:4<<20-5-9-2-1]
	file := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(file, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "received")
	sub := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-V", "5", "-q", "1", "-t", "big/one", "-C", "1", "-N", "-i", "big-sub")
	outf, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer outf.Close()
	var subErr strings.Builder
	sub.Stdout, sub.Stderr = outf, &subErr
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "mosquitto_sub subscribed", func() bool {
		o, _ := exec.Command(smartgoBinary(t), "admin", "mqtt", "clients", "-registry", s.registry).CombinedOutput()
		return strings.Contains(string(o), "big-sub")
	})
	if o, err := exec.CommandContext(ctx, pub, "-h", host, "-p", port, "-V", "5", "-q", "1", "-t", "big/one", "-f", file, "-i", "big-pub").CombinedOutput(); err != nil || len(o) > 0 {
		t.Fatalf("mosquitto_pub of a 4 MiB packet: %v %s", err, o)
	}
	if err := sub.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v %s", err, subErr.String())
	}
	if data, _ := os.ReadFile(out); !bytes.Equal(data, payload) {
		t.Fatalf("mosquitto_sub received %d bytes, want the %d published", len(data), len(payload))
	}
}
