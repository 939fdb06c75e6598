package bridge

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// BenchmarkBridgeIngressQoS2: QoS 2 PUBLISH -> PUBREC -> PUBREL ->
// PUBCOMP from one MQTT 3.1.1 publisher, with up to window exchanges
// open, for a clean session and for a persistent one (whose exchanges
// wait for session records, mqtt.QoS2Backend). It reports the
// MQTT_SESSION records written per message and the process's CPU time
// per message (publisher, bridge and broker together).
func BenchmarkBridgeIngressQoS2(b *testing.B) {
	c := startCluster(b)
	br := startBridge(b, c, nil)
	for _, persistent := range []bool{false, true} {
		for _, window := range []int{1, 16} {
			b.Run(fmt.Sprintf("persistent=%v/window=%d", persistent, window), func(b *testing.B) {
				id := fmt.Sprintf("qos2-%v-%d-%d", persistent, window, time.Now().UnixNano())
				before := sessionRecords(b, br)
				b.ResetTimer()
				start, cpu := time.Now(), processCPU()
				if err := qos2Publisher(addrOf(br), id, !persistent, b.N, make([]byte, ingressSize), window); err != nil {
					b.Fatal(err)
				}
				used := processCPU() - cpu
				reportRate(b, start)
				b.StopTimer()
				b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-us/msg")
				b.ReportMetric(float64(sessionRecords(b, br)-before)/float64(b.N), "records/msg")
			})
		}
	}
}

// processCPU is the CPU time (user and system) the process used so far:
// publisher, bridge and broker together.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sessionRecords is the number of messages in the session topic.
func sessionRecords(b *testing.B, br *Bridge) int64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := br.Backend().adm.TopicStats(ctx, br.Backend().opts.SessionTopic)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, q := range st {
		n += q.MaxOffset - q.MinOffset
	}
	return n
}

func qos2Publisher(addr, id string, clean bool, count int, payload []byte, window int) error {
	bc, err := dialBench(addr, id, clean)
	if err != nil {
		return err
	}
	defer bc.nc.Close()
	nc, read, v := bc.nc, bc.read, bc.v
	var out []byte
	sent, done := 0, 0
	for done < count {
		out = out[:0]
		for sent < count && sent-done < window {
			sent++
			out, _ = packets.AppendPacket(out, &packets.Publish{QoS: 2, PacketID: uint16(sent%65535 + 1), Topic: "devices/" + id + "/telemetry", Payload: payload}, v)
		}
		if len(out) > 0 {
			if _, err := nc.Write(out); err != nil {
				return err
			}
		}
		p, err := read()
		if err != nil {
			return fmt.Errorf("after %d exchanges: %w", done, err)
		}
		switch p := p.(type) {
		case *packets.Pubrec:
			rel, _ := packets.AppendAck(nil, packets.TypePubrel, p.PacketID, 0, nil, v)
			if _, err := nc.Write(rel); err != nil {
				return err
			}
		case *packets.Pubcomp:
			done++
		}
	}
	return nil
}
