package mqtt

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Benchmarks (not in the default run):
//
//	go test ./mqtt -run '^$' -bench MQTT -benchtime 20000x
//
// BenchmarkMQTTIngressQoS1 publishes 128 B QoS 1 messages, 16 in flight
// per publisher, to SmartGo and (when installed) to mosquitto in the same
// run; BenchmarkMQTTFanout delivers one publisher's messages to 1,000
// subscribers and reports deliveries/s and p99 latency; the TCP echo
// baseline is the loopback floor.

func startMosquitto(b *testing.B) string {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		b.Skip("mosquitto not installed")
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	conf := b.TempDir() + "/m.conf"
	os.WriteFile(conf, []byte("listener "+port+" 127.0.0.1\nallow_anonymous true\nmax_inflight_messages 0\nmax_queued_messages 100000\n"), 0o644)
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + port
	checkFor(b, 5*time.Second, "mosquitto", func() bool {
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

func BenchmarkMQTTFanout(b *testing.B) {
	for _, qos := range []byte{0, 1} {
		b.Run("qos="+strconv.Itoa(int(qos)), func(b *testing.B) {
			const subs = 1000
			ts := startServer(b, func(o *Options) { o.MaxQueuedMessages = 1 << 20 })
			var lat []time.Duration
			var mu sync.Mutex
			var wg sync.WaitGroup
			clients := make([]*rawClient, subs)
			for i := range clients {
				clients[i] = connected(b, ts.addr, packets.Version311, "fan-"+strconv.Itoa(i))
				clients[i].subscribe(1, sub("fan", qos))
			}
			p := connected(b, ts.addr, packets.Version311, "fan-pub")
			b.ResetTimer()
			start := time.Now()
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for range b.N {
						pk, err := c.next(30 * time.Second)
						if err != nil {
							b.Error(err)
							return
						}
						pub := pk.(*packets.Publish)
						sentAt, _ := strconv.ParseInt(string(pub.Payload), 10, 64)
						mine = append(mine, time.Duration(time.Now().UnixNano()-sentAt))
						if pub.QoS == 1 {
							buf, _ := packets.AppendPacket(nil, &packets.Puback{PacketID: pub.PacketID}, packets.Version311)
							c.nc.Write(buf)
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			for range b.N {
				p.send(&packets.Publish{Topic: "fan", Payload: []byte(strconv.FormatInt(time.Now().UnixNano(), 10))})
			}
			wg.Wait()
			el := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(b.N*subs)/el.Seconds(), "deliveries/s")
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
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
