package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// connectOnce dials addr, sends a v5 CONNECT (session expiry 1 h unless
// clean), waits for the CONNACK, then disconnects normally. It returns the
// session present flag.
func connectOnce(addr, id string, clean bool) (bool, error) {
	var expiry uint32
	if !clean {
		expiry = 3600
	}
	return connectExpiry(addr, id, clean, expiry)
}

// connectExpiry is connectOnce with the session expiry given (seconds).
func connectExpiry(addr, id string, clean bool, expiry uint32) (bool, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return false, err
	}
	defer nc.Close()
	v := packets.Version5
	cp := &packets.Connect{ClientID: id, CleanStart: clean, KeepAlive: 60}
	if expiry > 0 {
		cp.Properties.Present.Add(packets.PropSessionExpiry)
		cp.Properties.SessionExpiry = expiry
	}
	out, err := packets.AppendPacket(nil, cp, v)
	if err != nil {
		return false, err
	}
	if _, err := nc.Write(out); err != nil {
		return false, err
	}
	dec, _ := packets.NewDecoder(packets.Options{MaxPacketSize: 1 << 20})
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		if len(buf) > 0 {
			p, _, err := dec.Next(v, buf)
			if err == nil {
				ack, ok := p.(*packets.Connack)
				if !ok || ack.ReasonCode != 0 {
					return false, fmt.Errorf("want CONNACK 0, got %T %+v", p, p)
				}
				out, _ = packets.AppendPacket(out[:0], &packets.Disconnect{}, v)
				_, err := nc.Write(out)
				return ack.SessionPresent, err
			}
			if !errors.Is(err, packets.ErrIncomplete) {
				return false, err
			}
		}
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := nc.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil && n == 0 {
			return false, err
		}
	}
}

// memoryNode is the baseline: the same engine on the in-memory back end.
func memoryNode(b *testing.B) string {
	b.Helper()
	mo := mqtt.DefaultOptions()
	mo.Listen = []string{"127.0.0.1:0"}
	s, err := mqtt.NewServer(mo, mqtt.NewMemoryBackend())
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s.Addrs()[0].String()
}

// BenchmarkBridgeConnect: sequential connects (CONNECT, CONNACK,
// DISCONNECT) through a bridge node: clean starts (without and with a
// session expiry), and persistent
// sessions resuming on the other node each time (the client alternates
// between two nodes). The baseline is the engine on the in-memory back
// end, clean starts. Reports connects/s.
func BenchmarkBridgeConnect(b *testing.B) {
	c := startCluster(b)
	na := startBridge(b, c, nil)
	nb := startBridge(b, c, nil)
	mem := memoryNode(b)
	run := func(b *testing.B, fn func(i int) error) {
		start := time.Now()
		for i := range b.N {
			if err := fn(i); err != nil {
				b.Fatalf("connect %d: %v", i, err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "connects/s")
	}
	b.Run("baseline-memory-clean", func(b *testing.B) {
		run(b, func(i int) error { _, err := connectOnce(mem, fmt.Sprintf("m%d", i%64), true); return err })
	})
	b.Run("bridge-clean", func(b *testing.B) {
		run(b, func(i int) error { _, err := connectOnce(addrOf(na), fmt.Sprintf("c%d", i%64), true); return err })
	})
	b.Run("bridge-clean-expiry", func(b *testing.B) {
		// A clean start with a session expiry: its announcement stands
		// for the new session on every node (a session record is saved
		// at the DISCONNECT).
		run(b, func(i int) error {
			_, err := connectExpiry(addrOf(na), fmt.Sprintf("e%d", i%64), true, 3600)
			return err
		})
	})
	b.Run("bridge-takeover-live", func(b *testing.B) {
		// The previous connection stays open: the new node takes the
		// session over from the live one (no DISCONNECT before).
		id := fmt.Sprintf("t%d", time.Now().UnixNano())
		nodes := []string{addrOf(nb), addrOf(na)}
		prev, _, err := holdOpen(addrOf(na), id)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := range b.N {
			next, present, err := holdOpen(nodes[i%2], id)
			if err != nil {
				b.Fatalf("takeover %d: %v", i, err)
			}
			if !present {
				b.Fatalf("takeover %d: session not present", i)
			}
			prev.Close()
			prev = next
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "connects/s")
		prev.Close()
	})
	b.Run("bridge-resume-other-node", func(b *testing.B) {
		id := fmt.Sprintf("r%d", time.Now().UnixNano())
		if _, err := connectOnce(addrOf(na), id, false); err != nil {
			b.Fatal(err)
		}
		nodes := []string{addrOf(nb), addrOf(na)}
		missing := 0
		run(b, func(i int) error {
			present, err := connectOnce(nodes[i%2], id, false)
			if !present {
				missing++
			}
			return err
		})
		if missing > 0 {
			b.Fatalf("%d of %d resumes found no session", missing, b.N)
		}
	})
}

// holdOpen connects a persistent v5 client (not clean) and returns the
// open connection and the session present flag once the CONNACK arrived.
func holdOpen(addr, id string) (net.Conn, bool, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	cp := &packets.Connect{ClientID: id, KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 3600
	out, _ := packets.AppendPacket(nil, cp, packets.Version5)
	if _, err := nc.Write(out); err != nil {
		nc.Close()
		return nil, false, err
	}
	dec, _ := packets.NewDecoder(packets.Options{MaxPacketSize: 1 << 20})
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		if len(buf) > 0 {
			p, _, err := dec.Next(packets.Version5, buf)
			if err == nil {
				ack, ok := p.(*packets.Connack)
				if !ok || ack.ReasonCode != 0 {
					nc.Close()
					return nil, false, fmt.Errorf("want CONNACK 0, got %T %+v", p, p)
				}
				return nc, ack.SessionPresent, nil
			}
			if !errors.Is(err, packets.ErrIncomplete) {
				nc.Close()
				return nil, false, err
			}
		}
		nc.SetReadDeadline(time.Now().Add(60 * time.Second)) // a storm's last CONNACKs come late
		n, err := nc.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil && n == 0 {
			nc.Close()
			return nil, false, err
		}
	}
}
