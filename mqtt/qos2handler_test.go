package mqtt

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestQoS2DupWhileEarlierConnectionsHandlerRuns: on a pipelined server
// (an asynchronous backend), a QoS 2 PUBLISH goes to a synchronous topic
// handler (Server.Handle, as the IoT hub's twin requests do) that takes
// its time; the client's connection drops meanwhile, it resumes the
// session and sends the PUBLISH again with DUP. The handler is called
// once: the DUP's PUBREC waits for the first call's outcome, and a QoS 1
// PUBLISH after the DUP is acknowledged after it. The DUP used to call
// the handler a second time (the id counted as being stored only once the
// handler had returned).
func TestQoS2DupWhileEarlierConnectionsHandlerRuns(t *testing.T) {
	hb, s, addr := startHeldServer(t)
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the server's close
	s.Handle("h/#", func(_ context.Context, _ ClientInfo, _ *Message) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	})

	r1, _ := connectPersistent(t, addr, "hdup", true)
	r1.send(&packets.Publish{QoS: 2, PacketID: 7, Topic: "h/a", Payload: []byte("once")})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not called")
	}
	r1.nc.Close()

	r2, present := connectPersistent(t, addr, "hdup", false)
	if !present {
		t.Fatal("session not present")
	}
	r2.send(&packets.Publish{QoS: 2, PacketID: 7, Topic: "h/a", Payload: []byte("once"), Dup: true})
	// Handed to the backend once the DUP before it was handled.
	r2.send(&packets.Publish{QoS: 1, PacketID: 8, Topic: "q/b", Payload: []byte("next")})
	testutil.WaitFor(t, 5*time.Second, "the QoS 1 publish handed over", func() bool { return hb.count() == 1 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler was called %d times, want once", n)
	}
	hb.release([]int{0}, nil)
	r2.nothing(100 * time.Millisecond) // the PUBREC of 7 comes first, after the handler
	releaseOnce()
	if rec, ok := r2.recv().(*packets.Pubrec); !ok || rec.PacketID != 7 || rec.ReasonCode != 0 {
		t.Fatalf("want PUBREC 7 success, got %+v", rec)
	}
	if ack, ok := r2.recv().(*packets.Puback); !ok || ack.PacketID != 8 {
		t.Fatalf("want PUBACK 8, got %+v", ack)
	}
	r2.send(&packets.Pubrel{PacketID: 7})
	if c, ok := r2.recv().(*packets.Pubcomp); !ok || c.PacketID != 7 || c.ReasonCode != 0 {
		t.Fatalf("want PUBCOMP 7 success, got %+v", c)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler was called %d times, want once", n)
	}
}
