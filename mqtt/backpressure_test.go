package mqtt

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// slowSubscriber connects a v5 client, subscribes to filter at QoS 0 and
// returns it. Its receive buffer is 256 KiB: smaller than the loopback MSS
// (64 KiB) times a few, the kernel's silly window avoidance would stall
// the stream.
func slowSubscriber(t *testing.T, addr, id, filter string) *rawClient {
	t.Helper()
	r := dialRaw(t, addr, v5)
	if err := r.nc.(*net.TCPConn).SetReadBuffer(256 << 10); err != nil {
		t.Fatal(err)
	}
	r.connect(&packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60})
	r.subscribe(1, sub(filter, 0))
	return r
}

// serverConn returns the server's connection of client id.
func serverConn(s *Server, id string) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[id]; ss != nil {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return ss.conn
	}
	return nil
}

// TestMQTTQoS0SlowReaderDisconnected: a subscriber that reads (slowly) but
// cannot keep up with a QoS 0 stream has messages dropped, counted and
// logged once per interval naming it, and after SlowReaderTimeout of
// backed-up output it is disconnected (0x97 in the log), with its buffered
// output never over MaxOutbound.
func TestMQTTQoS0SlowReaderDisconnected(t *testing.T) {
	const maxOut = 256 << 10
	ts := startServer(t, func(o *Options) { o.MaxOutbound = maxOut; o.SlowReaderTimeout = time.Second })
	slow := slowSubscriber(t, ts.addr, "slow0", "q0")
	var read atomic.Int64
	var fast atomic.Bool
	done := make(chan struct{})
	go func() { // a real reader, 1 KiB every 20 ms (about 50 KiB/s), then to EOF
		defer close(done)
		buf := make([]byte, 1024)
		for {
			slow.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := slow.nc.Read(buf)
			read.Add(int64(n))
			if err != nil {
				return
			}
			if !fast.Load() {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	p := connected(t, ts.addr, v5, "pub0")
	payload := []byte(strings.Repeat("z", 4<<10))
	start := time.Now()
	var maxBacklog int
	for ts.Stats().SlowReaders.Load() == 0 {
		// Loopback socket buffers take megabytes before the server's own
		// output backs up; on a busy machine filling them takes a while.
		if time.Since(start) > 60*time.Second {
			t.Fatalf("slow reader not disconnected; dropped %d, read %d", ts.Stats().DroppedQoS0.Load(), read.Load())
		}
		for range 16 {
			p.send(&packets.Publish{Topic: "q0", Payload: payload})
		}
		if c := serverConn(ts.Server, "slow0"); c != nil {
			maxBacklog = max(maxBacklog, c.outLen())
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	fast.Store(true)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("slow reader's connection not closed")
	}
	st := ts.Stats()
	if st.DroppedQoS0.Load() == 0 || st.Dropped.Load() < st.DroppedQoS0.Load() {
		t.Fatalf("drops not counted: Dropped %d DroppedQoS0 %d", st.Dropped.Load(), st.DroppedQoS0.Load())
	}
	if took < time.Second {
		t.Fatalf("disconnected after %v, before SlowReaderTimeout", took)
	}
	if maxBacklog > maxOut+len(payload)+64 {
		t.Fatalf("output backlog reached %d bytes, over MaxOutbound %d", maxBacklog, maxOut)
	}
	logs := ts.logs.String()
	dropLines := strings.Count(logs, "QoS 0 messages dropped")
	if dropLines != 1 || !strings.Contains(logs, "client=slow0") {
		t.Fatalf("want one rate-limited drop line naming the client, got %d:\n%s", dropLines, logs)
	}
	testutil.WaitFor(t, 5*time.Second, "disconnect log", func() bool {
		return strings.Contains(ts.logs.String(), "slow reader: output backed up for")
	})
	for _, line := range strings.Split(ts.logs.String(), "\n") {
		if strings.Contains(line, "slow reader: output backed up") &&
			(!strings.Contains(line, "client=slow0") || !strings.Contains(line, "code=151")) {
			t.Fatalf("disconnect line lacks the client or 0x97: %s", line)
		}
	}
	t.Logf("disconnected after %v; dropped %d QoS 0 messages; client read %d bytes; max backlog %d",
		took.Round(time.Millisecond), st.DroppedQoS0.Load(), read.Load(), maxBacklog)
}

// TestMQTTQoS0BackedUpThenDrained: a client whose output backs up (QoS 0
// dropped) and then drains is not disconnected later: a new backlog starts
// a new SlowReaderTimeout.
func TestMQTTQoS0BackedUpThenDrained(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxOutbound = 128 << 10; o.SlowReaderTimeout = 500 * time.Millisecond })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logs.String())
		}
	})
	r := slowSubscriber(t, ts.addr, "stall", "q0")
	p := connected(t, ts.addr, v5, "pub1")
	payload := []byte(strings.Repeat("z", 4<<10))
	// The client does not read: the output backs up and drops start. The
	// publisher waits for each PUBACK (sent after the delivery), so no
	// publish is still queued in the server when the first drop is seen:
	// a loaded machine working through a queue of them for longer than
	// SlowReaderTimeout would disconnect the subscriber.
	for i := 0; ts.Stats().DroppedQoS0.Load() == 0; i++ {
		if i == 10000 {
			t.Fatal("no drop while the client does not read")
		}
		p.publish1(uint16(i%60000+1), "q0", string(payload))
	}
	// It reads everything queued; then, past the timeout, a new message
	// is delivered and the connection stays.
	c := serverConn(ts.Server, "stall")
	buf := make([]byte, 64<<10)
	dstart := time.Now()
	for quiet := time.Now(); c.outLen() > 0 || time.Since(quiet) < 300*time.Millisecond; {
		if time.Since(dstart) > 20*time.Second {
			t.Fatalf("output not drained: %d bytes left", c.outLen())
		}
		r.nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if n, err := r.nc.Read(buf); n > 0 {
			quiet = time.Now()
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("read: %v", err)
		}
	}
	r.Discard() // only whole packets were sent
	time.Sleep(700 * time.Millisecond)
	p.send(&packets.Publish{Topic: "q0", Payload: []byte("after")})
	if got := r.expectPublish(); string(got.Payload) != "after" {
		t.Fatalf("got %q", got.Payload)
	}
	// A new backlog starts a new timer: its first drops do not disconnect.
	dropped := ts.Stats().DroppedQoS0.Load()
	for i := 0; ts.Stats().DroppedQoS0.Load() == dropped; i++ {
		if i == 10000 {
			t.Fatal("no drop on the second backlog")
		}
		p.publish1(uint16(i%60000+1), "q0", string(payload))
	}
	time.Sleep(100 * time.Millisecond) // a disconnect would be queued by now
	if n := ts.Stats().SlowReaders.Load(); n != 0 {
		t.Fatalf("%d slow reader disconnects, want 0", n)
	}
}
