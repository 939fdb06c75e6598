package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// BenchmarkClusterReplication measures produce throughput of 1 KiB
// messages (16 concurrent senders, SEND_MESSAGE_V2 over loopback) for a
// master with no slave, an async master with one slave and a sync master
// with one slave, in the same run, and the replication lag under that
// load: the largest gap in bytes seen while producing, and how long the
// slave needed to reach the master's end after the load stopped.
func BenchmarkClusterReplication(b *testing.B) {
	for _, mode := range []struct {
		name        string
		slaves, syn bool
	}{{"no-slave", false, false}, {"async-master", true, false}, {"sync-master", true, true}} {
		b.Run(mode.name, func(b *testing.B) {
			c, err := Start(context.Background(), Options{Dir: b.TempDir(), LargeFiles: true, Slaves: mode.slaves, SyncMaster: mode.syn,
				Broker: func(i int, o *broker.Options) { o.Store.SegmentSize = 256 << 20 }})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			rc, err := remoting.NewClient(remoting.ClientOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer rc.Close()
			body := make([]byte, 1024)
			hdr := (&protocol.SendMessageRequestHeader{ProducerGroup: "bench", Topic: "HABench", DefaultTopic: broker.AutoCreateTopicKey,
				DefaultTopicQueueNums: 4, QueueID: -1}).V2()
			master := c.BrokerAddr(0)
			send := func() int32 {
				resp, err := rc.Invoke(context.Background(), master, protocol.NewRequest(protocol.SendMessageV2, hdr, body))
				if err != nil {
					b.Fatal(err)
				}
				return resp.Code
			}
			// Warm up until the topic exists and (sync) the slave acks.
			deadline := time.Now().Add(20 * time.Second)
			for send() != protocol.Success {
				if time.Now().After(deadline) {
					b.Fatal("no successful send while warming up")
				}
				time.Sleep(20 * time.Millisecond)
			}
			var maxLag atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				t := time.NewTicker(5 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
					}
					if s := c.Slave(0); s != nil {
						if lag := c.Broker(0).Store().MaxPhysicalOffset() - s.Store().MaxPhysicalOffset(); lag > maxLag.Load() {
							maxLag.Store(lag)
						}
					}
				}
			}()
			var failed atomic.Int64
			b.SetBytes(1024)
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if send() != protocol.Success {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			close(stop)
			<-sampled
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if failed.Load() > 0 {
				b.Fatalf("%d sends not acknowledged with SUCCESS", failed.Load())
			}
			if s := c.Slave(0); s != nil {
				end := c.Broker(0).Store().MaxPhysicalOffset()
				start := time.Now()
				for s.Store().MaxPhysicalOffset() < end {
					if time.Since(start) > 30*time.Second {
						b.Fatal("slave did not catch up")
					}
					time.Sleep(100 * time.Microsecond)
				}
				b.ReportMetric(float64(maxLag.Load()), "max-lag-bytes")
				b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "catch-up-ms")
			}
		})
	}
}
