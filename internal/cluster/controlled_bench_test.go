package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/controller"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// produceRate runs 16 senders of 1 KiB messages (SEND_MESSAGE_V2 over
// loopback) against the group's master for d and returns the
// acknowledged messages per second.
func produceRate(b *testing.B, c *Controlled, d time.Duration) float64 {
	b.Helper()
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	m, ok := c.Master()
	if !ok {
		b.Fatal("no master")
	}
	master := c.BrokerAddr(m)
	hdr := (&protocol.SendMessageRequestHeader{ProducerGroup: "bench", Topic: "CtlBench", DefaultTopic: broker.AutoCreateTopicKey,
		DefaultTopicQueueNums: 4, QueueID: -1}).V2()
	body := make([]byte, 1024)
	send := func() int32 {
		resp, err := rc.Invoke(context.Background(), master, protocol.NewRequest(protocol.SendMessageV2, hdr, body))
		if err != nil {
			b.Fatal(err)
		}
		return resp.Code
	}
	deadline := time.Now().Add(20 * time.Second)
	for send() != protocol.Success {
		if time.Now().After(deadline) {
			b.Fatal("no acknowledged send while warming up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n atomic.Int64
	var fmu sync.Mutex
	failed := map[int32]int{} // response code -> count, protected by fmu
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if code := send(); code == protocol.Success {
					n.Add(1)
				} else {
					fmu.Lock()
					failed[code]++
					fmu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		b.Fatalf("sends not acknowledged (response code: count): %v", failed)
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}

// BenchmarkClusterControllerProduce measures, in one run, the produce
// throughput of controller-mode groups of two and of three brokers whose
// master acknowledges at once (async_master) and once every slave has a
// message (sync_master: one sync replica in a group of two, two in a
// group of three), and reports each sync rate as a ratio of the async
// rate of the same group size: all brokers share the machine's cores, so
// only groups of one size compare.
func BenchmarkClusterControllerProduce(b *testing.B) {
	modes := []struct {
		name  string
		sync  bool
		group int
	}{{"async2", false, 2}, {"sync1", true, 2}, {"async3", false, 3}, {"sync2", true, 3}}
	rates := make([]float64, len(modes))
	for range b.N {
		for i, m := range modes {
			// A 5 s heartbeat timeout (a lease of 3.3 s): the senders load
			// the CPU, and the heartbeats that renew the master's lease
			// must not be late enough for it to stop acknowledging.
			c, err := StartControlled(context.Background(), CtlOptions{Dir: b.TempDir(), Sync: m.sync, GroupSize: m.group,
				Broker:     func(_ int, o *broker.Options) { o.Store.SegmentSize = 256 << 20 },
				Controller: func(_ int, o *controller.Options) { o.HeartbeatTimeout = 5 * time.Second }})
			if err != nil {
				b.Fatal(err)
			}
			waitSet := time.Now().Add(30 * time.Second)
			for {
				j, ok := c.Master()
				if ok {
					if _, _, _, set := c.Broker(j).ControllerState(); len(set) == m.group {
						break
					}
				}
				if time.Now().After(waitSet) {
					b.Fatal("sync state set not complete")
				}
				time.Sleep(20 * time.Millisecond)
			}
			rates[i] += produceRate(b, c, 3*time.Second)
			_ = c.Close()
		}
	}
	for i, m := range modes {
		b.ReportMetric(rates[i]/float64(b.N), m.name+"-msgs/s")
	}
	b.ReportMetric(rates[1]/rates[0], "sync1/async2")
	b.ReportMetric(rates[3]/rates[2], "sync2/async3")
}
