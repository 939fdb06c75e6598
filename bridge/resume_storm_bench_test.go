package bridge

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// BenchmarkBridgeResumeStorm: SMARTGO_STORM_SESSIONS (default 500)
// persistent sessions, each subscribed to one of 50 telemetry topics,
// go offline; messages arrive for them; the bridge node restarts (a new
// node takes over) and every client reconnects at once. Reports the
// sessions resumed per second and how many clients were refused (0x88).
func BenchmarkBridgeResumeStorm(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_STORM_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	c := startCluster(b)
	node := startBridge(b, c, nil)
	for i := range n {
		r, _ := persistent(b, addrOf(node), fmt.Sprintf("storm-%d", i), true)
		r.subscribe(1, sub(fmt.Sprintf("devices/%d/telemetry", i%50), 1))
		r.disconnect()
	}
	var refused, absent atomic.Int64
	var total time.Duration
	for it := range b.N {
		b.StopTimer()
		pub := connected(b, addrOf(node), packets.Version5, fmt.Sprintf("storm-pub-%d", it))
		for k := range 50 {
			pub.publish1(uint16(k+1), &packets.Publish{Topic: fmt.Sprintf("devices/%d/telemetry", k), Payload: []byte("x")})
		}
		pub.disconnect()
		node.Close()
		node = startBridge(b, c, nil)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nc, present, err := holdOpen(addrOf(node), fmt.Sprintf("storm-%d", i))
				if err != nil {
					if refused.Add(1) <= 3 {
						b.Logf("storm-%d: %v", i, err)
					}
					return
				}
				nc.Close()
				if !present {
					absent.Add(1)
				}
			}()
		}
		wg.Wait()
		total += time.Since(start)
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "sessions/s")
	b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/storm")
	b.ReportMetric(float64(absent.Load())/float64(b.N), "absent/storm")
}
