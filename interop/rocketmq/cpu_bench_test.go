package rocketmq

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
)

// BenchmarkRealClientServerCPU measures the server CPU per message of a
// `smartgo standalone` process (its threads' run time, testutil.ProcessCPU)
// under unmodified rocketmq-client-go v2.1.2 clients, the load of issue
// #19: one producer with realClientWindow asynchronous sends of 1 KiB in
// flight (each its own SEND_MESSAGE request, written as that client writes
// it: extFields in Go's map order), then one push consumer reading them
// all. One op is one message; it reports the publish phase's and the
// consume phase's CPU per message (smartgo-publish-cpu-µs/msg,
// smartgo-consume-cpu-µs/msg) and their sum. With
// SMARTGO_BENCH_BASE_BIN=<smartgo binary of another build> that build runs
// the same load right after (base-..., smartgo/base).
//
//	cd interop && go test -run '^$' -bench RealClientServerCPU -benchtime 50000x ./rocketmq/
//
// The client is the bottleneck here (it spends more CPU per message than
// the server), so the broker sees few requests per read, unlike
// compare's raw-frame load (make compare-cpu), where NATS JetStream runs
// beside it.
func BenchmarkRealClientServerCPU(b *testing.B) {
	servers := []struct{ name, bin string }{{"smartgo", testnet.SmartgoBinary(b, filepath.Join("..", ".."))}}
	if base := os.Getenv("SMARTGO_BENCH_BASE_BIN"); base != "" {
		servers = append(servers, struct{ name, bin string }{"base", base})
	}
	perMsg := map[string]float64{}
	for _, s := range servers {
		pub, con := realClientRun(b, s.bin, b.N)
		b.ReportMetric(pub, s.name+"-publish-cpu-µs/msg")
		b.ReportMetric(con, s.name+"-consume-cpu-µs/msg")
		b.ReportMetric(pub+con, s.name+"-cpu-µs/msg")
		perMsg[s.name] = pub + con
	}
	if base := perMsg["base"]; base > 0 {
		b.ReportMetric(perMsg["smartgo"]/base, "smartgo/base")
	}
}

// realClientWindow is how many sends the benchmark's producer keeps in
// flight (the load).
const realClientWindow = 1000

// realClientRun runs n messages through a new standalone of bin with the
// real client and returns the server's CPU µs per message while they were
// published and while they were consumed.
func realClientRun(b *testing.B, bin string, n int) (publish, consume float64) {
	b.Helper()
	dir := b.TempDir()
	ports := testnet.FreePorts(b, 3)
	registry := fmt.Sprintf("127.0.0.1:%d", ports[0])
	logPath := filepath.Join(dir, "smartgo.log")
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "standalone", "-data", filepath.Join(dir, "data"),
		"-set", "registry.listen="+registry, "-set", fmt.Sprintf("broker.listen=127.0.0.1:%d", ports[1]),
		"-set", fmt.Sprintf("bridge.listen=127.0.0.1:%d", ports[2]), "-set", "console.listen=127.0.0.1:0",
		"-set", "amqp.listen=", "-set", "store.segment_size=256MiB")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	testutil.WaitFor(b, 30*time.Second, "the standalone to register", func() bool { return fileContains(logPath, "registered with registry") })
	pid := cmd.Process.Pid

	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{registry})),
		producer.WithGroupName("cpu-bench"), producer.WithSendMsgTimeout(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Shutdown() }()
	const topic = "CPU_BENCH"
	body := make([]byte, 1024)
	testutil.Eventually(b, 30*time.Second, func() error { // the topic is made by the first send
		_, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body))
		return err
	})
	warm := min(n/10, 5000)
	var failed atomic.Int64
	send := func(count int) {
		credit := make(chan struct{}, realClientWindow)
		for range count {
			credit <- struct{}{}
			err := p.SendAsync(context.Background(), func(_ context.Context, _ *primitive.SendResult, err error) {
				if err != nil {
					failed.Add(1)
				}
				<-credit
			}, primitive.NewMessage(topic, body))
			if err != nil {
				failed.Add(1)
				<-credit
			}
		}
		for range realClientWindow { // every answer in
			credit <- struct{}{}
		}
	}
	send(warm)
	c0, err := testutil.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	send(n)
	c1, _ := testutil.ProcessCPU(pid)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d sends failed", f)
	}

	total := int64(1 + warm + n)
	var got atomic.Int64
	pc, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{registry})),
		consumer.WithGroupName("cpu-bench-consumers"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		b.Fatal(err)
	}
	if err := pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		got.Add(int64(len(msgs)))
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		b.Fatal(err)
	}
	c2, _ := testutil.ProcessCPU(pid)
	if err := pc.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pc.Shutdown() }()
	testutil.WaitFor(b, 5*time.Minute, "every message consumed", func() bool { return got.Load() >= total })
	c3, _ := testutil.ProcessCPU(pid)
	us := func(d time.Duration, msgs int64) float64 {
		return float64(d) / float64(time.Microsecond) / float64(msgs)
	}
	return us(c1.Since(c0), int64(n)), us(c3.Since(c2), total)
}
