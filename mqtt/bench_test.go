package mqtt

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Benchmarks (not in the default run):
//
//	go test ./mqtt -run '^$' -bench 'MQTT(Ingress|Baseline)' -benchtime 20000x
//
// BenchmarkMQTTIngressQoS1 publishes 128 B QoS 1 messages, 16 in flight
// per publisher, to SmartGo and (when installed) to mosquitto in the same
// run (BenchmarkMQTTFanout is in fanout_test.go); the TCP echo baseline
// is the loopback floor.

// startMosquitto runs /usr/sbin/mosquitto (or the one on PATH) on a free
// 127.0.0.1 port with SmartGo's default per-client limits (1,024 QoS 1/2
// messages in flight, 1,000 queued) and returns its address.
func startMosquitto(b *testing.B) string {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/mosquitto"); err2 != nil {
			b.Skip("mosquitto not installed")
		}
		bin = "/usr/sbin/mosquitto"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	_, port, err := net.SplitHostPort(l.Addr().String())
	l.Close()
	if err != nil {
		b.Fatal(err)
	}
	conf := b.TempDir() + "/m.conf"
	if err := os.WriteFile(conf, []byte("listener "+port+" 127.0.0.1\nallow_anonymous true\nmax_inflight_messages 1024\nmax_queued_messages 1000\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + port
	testutil.WaitFor(b, 5*time.Second, "mosquitto", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// ingress runs b.N QoS 1 publishes split over pubs publishers with a
// window of 16 each.
func ingress(b *testing.B, addr string, pubs int) {
	payload := make([]byte, 128)
	clients := make([]*rawClient, pubs)
	for i := range clients {
		clients[i] = connected(b, addr, packets.Version311, "bench-"+strconv.Itoa(i))
	}
	b.SetBytes(128)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		n := b.N / pubs
		if i == 0 {
			n += b.N % pubs
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			const window = 16
			sent, acked := 0, 0
			for acked < n {
				for sent < n && sent-acked < window {
					buf, _ := packets.AppendPacket(nil, &packets.Publish{QoS: 1, PacketID: uint16(sent%60000 + 1), Topic: "bench/in", Payload: payload}, packets.Version311)
					c.nc.Write(buf)
					sent++
				}
				if _, err := c.next(10 * time.Second); err != nil {
					b.Error(err)
					return
				}
				acked++
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func BenchmarkMQTTIngressQoS1(b *testing.B) {
	for _, pubs := range []int{1, 16} {
		b.Run("smartgo/pubs="+strconv.Itoa(pubs), func(b *testing.B) {
			ts := startServer(b, nil)
			ingress(b, ts.addr, pubs)
		})
		b.Run("mosquitto/pubs="+strconv.Itoa(pubs), func(b *testing.B) {
			ingress(b, startMosquitto(b), pubs)
		})
	}
}

// BenchmarkMQTTBaselineTCPEcho is the loopback floor: a 128 B round trip.
func BenchmarkMQTTBaselineTCPEcho(b *testing.B) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 128)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			c.Write(buf)
		}
	}()
	c, _ := net.Dial("tcp", l.Addr().String())
	defer c.Close()
	buf := make([]byte, 128)
	b.SetBytes(128)
	b.ResetTimer()
	for range b.N {
		c.Write(buf)
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMQTTHandlerFor: finding the handler of a state store request's
// topic, as publishInline and handlePublish do for each request, from
// both cores at once.
func BenchmarkMQTTHandlerFor(b *testing.B) {
	s := startServer(b, nil).Server
	const topic = "statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke"
	s.HandleInline(topic, func(context.Context, ClientInfo, *Message, func() func(error)) error { return nil })
	req := strings.Clone(topic)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, h, _ := s.handlerFor(req); h == nil {
				b.Fatal("no handler")
			}
		}
	})
}
