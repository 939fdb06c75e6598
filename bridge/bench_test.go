package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// ingressSize is the payload size of the ingress benchmarks (issue 8).
const ingressSize = 128

// qos1Load runs pubs MQTT v3.1.1 publishers against addr, n QoS 1
// messages of size bytes in all, each with up to window unacknowledged,
// and returns when every PUBACK arrived.
func qos1Load(b *testing.B, addr string, pubs, n, size, window int) {
	b.Helper()
	payload := make([]byte, size)
	var wg sync.WaitGroup
	errc := make(chan error, pubs)
	for p := range pubs {
		count := n / pubs
		if p < n%pubs {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- qos1Publisher(addr, fmt.Sprintf("bench-%d-%d", p, time.Now().UnixNano()), count, payload, window)
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			b.Fatal(err)
		}
	}
}

func qos1Publisher(addr, id string, count int, payload []byte, window int) error {
	bc, err := dialBench(addr, id, true)
	if err != nil {
		return err
	}
	defer bc.nc.Close()
	nc, read, v := bc.nc, bc.read, bc.v
	var out []byte
	sent, acked := 0, 0
	for acked < count {
		out = out[:0]
		for sent < count && sent-acked < window {
			sent++
			out, _ = packets.AppendPacket(out, &packets.Publish{QoS: 1, PacketID: uint16(sent%65535 + 1), Topic: "devices/" + id + "/telemetry", Payload: payload}, v)
		}
		if len(out) > 0 {
			if _, err := nc.Write(out); err != nil {
				return err
			}
		}
		p, err := read()
		if err != nil {
			return fmt.Errorf("after %d acks: %w", acked, err)
		}
		if _, ok := p.(*packets.Puback); ok {
			acked++
		}
	}
	return nil
}

// benchConn is a raw MQTT 3.1.1 connection of the benchmarks' publishers.
type benchConn struct {
	nc  net.Conn
	v   packets.Version
	dec *packets.Decoder
	buf []byte
	tmp []byte
}

// dialBench connects id to addr (clean: CleanSession) and reads the
// CONNACK.
func dialBench(addr, id string, clean bool) (*benchConn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	dec, _ := packets.NewDecoder(packets.Options{MaxPacketSize: 1 << 20})
	bc := &benchConn{nc: nc, v: packets.Version311, dec: dec, tmp: make([]byte, 16<<10)}
	out, _ := packets.AppendPacket(nil, &packets.Connect{ClientID: id, CleanStart: clean, KeepAlive: 60}, bc.v)
	var p packets.Packet
	if _, err = nc.Write(out); err == nil {
		p, err = bc.read()
	}
	if _, ok := p.(*packets.Connack); ok && err == nil {
		return bc, nil
	}
	nc.Close()
	if err == nil {
		err = fmt.Errorf("want CONNACK, got %T", p)
	}
	return nil, err
}

// read returns the next packet.
func (bc *benchConn) read() (packets.Packet, error) {
	for {
		if len(bc.buf) > 0 {
			p, k, err := bc.dec.Next(bc.v, bc.buf)
			if err == nil {
				bc.buf = bc.buf[k:]
				return p, nil
			}
			if !errors.Is(err, packets.ErrIncomplete) {
				return nil, err
			}
		}
		bc.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		k, err := bc.nc.Read(bc.tmp)
		bc.buf = append(bc.buf, bc.tmp[:k]...)
		if err != nil && k == 0 {
			return nil, err
		}
	}
}

func reportRate(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkBridgeIngressQoS1: QoS 1 PUBLISH -> PUBACK through a bridge,
// each message stored in the broker before its PUBACK.
func BenchmarkBridgeIngressQoS1(b *testing.B) {
	c := startCluster(b)
	br := startBridge(b, c, nil)
	for _, pubs := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("pubs=%d", pubs), func(b *testing.B) {
			b.SetBytes(ingressSize)
			b.ReportAllocs()
			start := time.Now()
			qos1Load(b, addrOf(br), pubs, b.N, ingressSize, 64)
			reportRate(b, start)
		})
	}
}

// BenchmarkBridgeProducerBaseline is the same load straight through the
// SDK (SendOrderly, one goroutine per publisher): the bridge's ceiling.
func BenchmarkBridgeProducerBaseline(b *testing.B) {
	c := startCluster(b)
	prod := newProducer(b, c)
	payload := make([]byte, ingressSize)
	for _, pubs := range []int{1, 16} {
		b.Run(fmt.Sprintf("pubs=%d", pubs), func(b *testing.B) {
			b.SetBytes(ingressSize)
			b.ReportAllocs()
			start := time.Now()
			var wg sync.WaitGroup
			for p := range pubs {
				count := b.N / pubs
				if p < b.N%pubs {
					count++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprint("k", p)
					for range count {
						if _, err := prod.SendOrderly(context.Background(), &client.Message{Topic: "TELEMETRY", Body: payload}, key, client.HashSelector); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			reportRate(b, start)
		})
	}
}

// BenchmarkMosquittoIngressQoS1 is the same MQTT load against a local
// mosquitto broker (skipped when not installed).
func BenchmarkMosquittoIngressQoS1(b *testing.B) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		b.Skip("mosquitto not installed (apt-get install mosquitto)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cfg := filepath.Join(b.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(cfg, []byte("listener "+port+" 127.0.0.1\nallow_anonymous true\nmax_inflight_messages 0\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cfg)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("mosquitto did not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pubs := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("pubs=%d", pubs), func(b *testing.B) {
			b.SetBytes(ingressSize)
			b.ReportAllocs()
			start := time.Now()
			qos1Load(b, addr, pubs, b.N, ingressSize, 64)
			reportRate(b, start)
		})
	}
}
