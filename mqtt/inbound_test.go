package mqtt

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// bigPublish encodes a QoS qos PUBLISH to topic whose packet is size
// bytes long.
func bigPublish(t testing.TB, topic string, qos byte, id uint16, size int) []byte {
	t.Helper()
	p := &packets.Publish{Topic: topic, QoS: qos, PacketID: id}
	b, err := packets.AppendPacket(nil, p, v5)
	if err != nil {
		t.Fatal(err)
	}
	for extra := range 4 { // the remaining length's bytes
		p.Payload = bytes.Repeat([]byte{'x'}, size-len(b)-extra)
		if out, err := packets.AppendPacket(nil, p, v5); err != nil {
			t.Fatal(err)
		} else if len(out) == size {
			return out
		}
	}
	t.Fatalf("no PUBLISH of %d bytes", size)
	return nil
}

// inboundIdle reports whether the budget holds nothing: no charge, no
// waiter, no pass.
func (ts *testServer) inboundIdle() bool {
	b := &ts.inb
	b.mu.Lock()
	defer b.mu.Unlock()
	return ts.Stats().InboundBytes.Load() == 0 && len(b.waiters) == 0 && b.nwait.Load() == 0 && b.pass == nil
}

func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// 100 clients each send 3 MiB of a 4 MiB PUBLISH and stop: the server's
// input stays within the budget (the gauge, and the heap) while another
// client's small messages go through, and everything is released when
// they leave; then a large packet completes.
func TestMQTTInboundBudgetBoundsPartialPackets(t *testing.T) {
	const (
		limit    = 16 << 20
		attack   = 100
		partial  = 3 << 20
		pktSize  = 4<<20 - 64
		slackMiB = 24
	)
	ts := startServer(t, func(o *Options) {
		o.MaxInboundMemory = limit
		o.InboundStallTimeout = time.Hour // no stall disconnections here
	})
	normal := connected(t, ts.addr, v5, "normal")
	normal.RecvTimeout = time.Minute // a loaded machine, 4 MiB under the race detector
	normal.subscribe(1, sub("ok", 1))
	big := bigPublish(t, "big", 0, 0, pktSize)
	base := heapAlloc()

	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // samples the gauge until the attackers left
		defer wg.Done()
		for {
			if v := ts.Stats().InboundBytes.Load(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	attackers := make([]*rawClient, attack)
	for i := range attackers {
		attackers[i] = connected(t, ts.addr, v5, fmt.Sprintf("a%d", i))
	}
	for _, a := range attackers {
		wg.Add(1)
		go func(nc net.Conn) {
			defer wg.Done()
			nc.Write(big[:partial]) // ends when the server read it or the test closes nc
		}(a.nc)
	}
	t0 := time.Now()
	// Settled: every attacker's input either holds its whole partial
	// packet or stopped being read for want of memory.
	testutil.WaitFor(t, 60*time.Second, "every attacker read whole or throttled", func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		n := 0
		for c := range ts.conns {
			c.inMu.Lock()
			if c.mem&memWaiting != 0 || len(c.in) == partial {
				n++
			}
			c.inMu.Unlock()
		}
		return n == attack
	})
	t.Logf("settled in %v", time.Since(t0))
	grew := heapAlloc() - base
	gauge := ts.Stats().InboundBytes.Load()
	t.Logf("settled: heap +%d MiB, gauge %d MiB (peak %d MiB), throttled %d", grew>>20, gauge>>20, peak.Load()>>20, ts.Stats().InboundThrottled.Load())
	bound := int64(limit + DefaultMaxPacketSize + 1<<20)
	if peak.Load() > bound || gauge > bound {
		t.Fatalf("inbound gauge %d (peak %d) over the budget %d plus one packet", gauge, peak.Load(), limit)
	}
	if grew > limit+DefaultMaxPacketSize+slackMiB<<20 {
		t.Fatalf("heap grew by %d MiB holding partial packets (budget %d MiB)", grew>>20, limit>>20)
	}
	if ts.Stats().InboundThrottled.Load() == 0 {
		t.Fatal("no connection throttled")
	}
	// Small packets of everyone else go on.
	for i := range 20 {
		payload := bytes.Repeat([]byte{byte('a' + i)}, 100+i*150)
		normal.send(&packets.Publish{QoS: 1, PacketID: uint16(10 + i), Topic: "ok", Payload: payload})
		var gotAck, gotMsg bool
		for !gotAck || !gotMsg {
			switch p := normal.recv().(type) {
			case *packets.Puback:
				gotAck = true
			case *packets.Publish:
				if !bytes.Equal(p.Payload, payload) {
					t.Fatalf("message %d: got %d bytes", i, len(p.Payload))
				}
				normal.send(&packets.Puback{PacketID: p.PacketID})
				gotMsg = true
			}
		}
	}
	t0 = time.Now()
	for _, a := range attackers {
		// Reset: a closed socket's unsent bytes would otherwise go
		// first, and the server would read each partial packet to its
		// end before seeing the close (one pass at a time).
		a.nc.(*net.TCPConn).SetLinger(0)
		a.nc.Close()
	}
	testutil.WaitFor(t, 30*time.Second, "budget released", ts.inboundIdle)
	t.Logf("released %v after the attackers left", time.Since(t0))
	close(stop)
	wg.Wait()
	// A large packet completes.
	normal.sendBytes(bigPublish(t, "ok", 1, 99, pktSize))
	for done := 0; done < 2; {
		switch p := normal.recv().(type) {
		case *packets.Puback:
			done++
		case *packets.Publish:
			if len(p.Payload) < pktSize-64 {
				t.Fatalf("large message: got %d bytes", len(p.Payload))
			}
			normal.send(&packets.Puback{PacketID: p.PacketID})
			done++
		}
	}
	testutil.WaitFor(t, 10*time.Second, "budget released after the large packet", ts.inboundIdle)
}

// Clients stalled inside partial packets while another waits for the
// budget are disconnected (0x97) and the waiting client's large packet
// completes.
func TestMQTTInboundBudgetDisconnectsStalled(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.MaxInboundMemory = 6 << 20
		o.InboundStallTimeout = 300 * time.Millisecond
	})
	big := bigPublish(t, "big", 0, 0, 3<<20)
	stalled := make([]*rawClient, 4)
	for i := range stalled {
		stalled[i] = connected(t, ts.addr, v5, fmt.Sprintf("s%d", i))
		stalled[i].sendBytes(big[:2<<20])
	}
	// A stalled client holding memory while another waits may already be
	// disconnected (after InboundStallTimeout) before this sees it: on a
	// busy machine one poll of the connections can come that late.
	testutil.WaitFor(t, 30*time.Second, "the stalled clients' input read or throttled", func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		n := int(ts.Stats().InboundStalled.Load())
		for c := range ts.conns {
			c.inMu.Lock()
			if c.mem&memWaiting != 0 || len(c.in) == 2<<20 {
				n++
			}
			c.inMu.Unlock()
		}
		return n >= len(stalled)
	})
	sender := connected(t, ts.addr, v5, "sender")
	receiver := connected(t, ts.addr, v5, "receiver")
	sender.RecvTimeout, receiver.RecvTimeout = time.Minute, time.Minute
	receiver.subscribe(1, sub("ok", 0))
	sender.sendBytes(bigPublish(t, "ok", 1, 7, 3<<20))
	if a, ok := sender.recv().(*packets.Puback); !ok || a.PacketID != 7 {
		t.Fatalf("want PUBACK 7, got %+v", a)
	}
	if p := receiver.expectPublish(); len(p.Payload) < 3<<20-64 {
		t.Fatalf("got %d bytes", len(p.Payload))
	}
	if ts.Stats().InboundStalled.Load() == 0 {
		t.Fatal("no stalled client disconnected")
	}
	// Those disconnected got 0x97 (the others are not read any more, or
	// were read whole after the budget was released).
	kicked := 0
	for _, s := range stalled {
		p, err := s.next(time.Second)
		if d, ok := p.(*packets.Disconnect); err == nil && ok {
			if d.ReasonCode != packets.ReasonQuotaExceeded {
				t.Fatalf("DISCONNECT %v, want 0x97", d.ReasonCode)
			}
			kicked++
		}
		s.nc.Close()
	}
	if kicked == 0 {
		t.Fatal("no stalled client got DISCONNECT 0x97")
	}
	testutil.WaitFor(t, 5*time.Second, "stall log line", func() bool {
		return bytes.Contains([]byte(ts.logs.String()), []byte("stalled inside a partial packet"))
	})
	testutil.WaitFor(t, 10*time.Second, "budget released", ts.inboundIdle)
}

// Clients that all send large packets at once, together far over the
// budget, all complete: one at a time reads past it (no deadlock).
func TestMQTTInboundBudgetLargePacketsComplete(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.MaxInboundMemory = 1 << 20 // each packet is larger
		o.InboundStallTimeout = time.Hour
		o.MaxOutbound = 64 << 20 // the receiver may fall behind
	})
	const clients, each = 6, 3
	receiver := connected(t, ts.addr, v5, "receiver")
	receiver.subscribe(1, sub("big/#", 1))
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := connected(t, ts.addr, v5, fmt.Sprintf("c%d", i))
		pkts := make([][]byte, each)
		for j := range pkts {
			pkts[j] = bigPublish(t, fmt.Sprintf("big/%d", i), 1, uint16(j+1), 1<<20+i*100_000+1000)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.nc.Write(bytes.Join(pkts, nil)); err != nil {
				errs <- err
				return
			}
			for j := range pkts {
				p, err := c.next(60 * time.Second)
				if a, ok := p.(*packets.Puback); err != nil || !ok || a.PacketID != uint16(j+1) {
					errs <- fmt.Errorf("client %d packet %d: %T %v", i, j, p, err)
					return
				}
			}
		}()
	}
	for range clients * each {
		p, err := receiver.next(60 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		pub, ok := p.(*packets.Publish)
		if !ok {
			t.Fatalf("got %T", p)
		}
		receiver.send(&packets.Puback{PacketID: pub.PacketID})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err, ts.logs.String())
	}
	t.Logf("throttled %d times", ts.Stats().InboundThrottled.Load())
	testutil.WaitFor(t, 10*time.Second, "budget released", ts.inboundIdle)
}

// Many connections come and go mid-packet, between packets, throttled
// or not: when they are gone the budget holds nothing.
func TestMQTTInboundBudgetNoLeak(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.MaxInboundMemory = 1 << 20
		o.InboundStallTimeout = 200 * time.Millisecond
	})
	rng := rand.New(rand.NewPCG(1, 2))
	pkts := [][]byte{
		bigPublish(t, "t", 0, 0, 300),
		bigPublish(t, "t", 0, 0, 5000),
		bigPublish(t, "t", 1, 1, 70_000),
		bigPublish(t, "t", 0, 0, 400_000),
		bigPublish(t, "t", 1, 2, 1_500_000),
	}
	var wg sync.WaitGroup
	for round := range 4 {
		conns := make([]net.Conn, 25)
		for i := range conns {
			r := connected(t, ts.addr, v5, fmt.Sprintf("n%d-%d", round, i))
			conns[i] = r.nc
			var stream []byte
			for range 1 + rng.IntN(4) {
				stream = append(stream, pkts[rng.IntN(len(pkts))]...)
			}
			cut := len(stream)
			if rng.IntN(2) == 0 {
				cut = rng.IntN(len(stream))
			}
			wg.Add(1)
			go func(nc net.Conn, b []byte) {
				defer wg.Done()
				nc.Write(b)
			}(r.nc, stream[:cut])
		}
		for _, nc := range conns {
			nc.Close() // wherever the server is in its stream
		}
	}
	wg.Wait()
	testutil.WaitFor(t, 30*time.Second, "every connection gone", func() bool { return ts.Stats().Connections.Load() == 0 })
	testutil.WaitFor(t, 10*time.Second, "budget released", ts.inboundIdle)
	t.Logf("throttled %d times, %d stalled disconnected", ts.Stats().InboundThrottled.Load(), ts.Stats().InboundStalled.Load())
}

// TLS connections (a reader goroutine each) are held to the budget too:
// throttled readers wait, and every large packet completes.
func TestMQTTInboundBudgetTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	ts := startServer(t, func(o *Options) {
		o.TLSListen = []string{"127.0.0.1:0"}
		o.TLSCertFile, o.TLSKeyFile = cert, key
		o.MaxInboundMemory = 1 << 20
		o.InboundStallTimeout = time.Hour
	})
	// A plain client holds the whole budget, and the pass, in a
	// partial packet: the TLS clients wait until it leaves.
	holder := connected(t, ts.addr, v5, "holder")
	holder.sendBytes(bigPublish(t, "big", 0, 0, 2<<20)[:1_500_000])
	testutil.WaitFor(t, 10*time.Second, "the holder's input read", func() bool {
		ts.inb.mu.Lock()
		defer ts.inb.mu.Unlock()
		return ts.inb.pass != nil && ts.Stats().InboundBytes.Load() >= 1_500_000
	})
	const clients, each = 3, 2
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		nc, err := tls.Dial("tcp", ts.Addrs()[1].String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		r := wrapRaw(t, nc, v5)
		r.connect(&packets.Connect{ClientID: fmt.Sprintf("tls%d", i), CleanStart: true})
		var stream []byte
		for j := range each {
			stream = append(stream, bigPublish(t, "t", 1, uint16(j+1), 2<<20)...)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := nc.Write(stream); err != nil {
				errs <- err
				return
			}
			for j := range each {
				p, err := r.next(60 * time.Second)
				if a, ok := p.(*packets.Puback); err != nil || !ok || a.PacketID != uint16(j+1) {
					errs <- fmt.Errorf("client %d packet %d: %T %v", i, j, p, err)
					return
				}
			}
		}()
	}
	testutil.WaitFor(t, 30*time.Second, "every TLS client throttled", func() bool {
		return ts.Stats().InboundThrottled.Load() >= clients
	})
	holder.nc.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "budget released", ts.inboundIdle)
}
