package mqtt

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// heldBackend is a MemoryBackend whose asynchronous publishes complete only
// when the test releases them, in any order.
type heldBackend struct {
	*MemoryBackend
	mu   sync.Mutex
	held []heldPublish // protected by mu
}

type heldPublish struct {
	msg  *Message
	done func(error)
}

func (b *heldBackend) PublishAsync(ctx context.Context, msg *Message, done func(error)) {
	b.mu.Lock()
	b.held = append(b.held, heldPublish{msg, done})
	b.mu.Unlock()
}

func (b *heldBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// release completes the held publishes with indexes idx (err for those in
// fail), storing the successful ones.
func (b *heldBackend) release(idx []int, fail map[int]error) {
	b.mu.Lock()
	hs := make([]heldPublish, len(idx))
	for i, k := range idx {
		hs[i] = b.held[k]
	}
	b.mu.Unlock()
	for i, h := range hs {
		if err := fail[idx[i]]; err != nil {
			h.done(err)
			continue
		}
		h.done(b.MemoryBackend.Publish(context.Background(), h.msg))
	}
}

func startHeld(t *testing.T, recvMax int) (*heldBackend, string) {
	t.Helper()
	hb := &heldBackend{MemoryBackend: NewMemoryBackend()}
	opts := DefaultOptions()
	opts.ReceiveMaximum = recvMax
	opts.Logger = slog.New(slog.DiscardHandler)
	return hb, serveBackend(t, opts, hb)
}

// TestPublishAsyncAcksInOrder: with an AsyncBackend the server keeps
// reading PUBLISHes while stores are in flight (up to the receive
// maximum), sends no PUBACK/PUBREC before the store completed, and sends
// them in PUBLISH order even when the stores complete in reverse.
func TestPublishAsyncAcksInOrder(t *testing.T) {
	hb, addr := startHeld(t, 4)
	r := connected(t, addr, v5, "pipe")
	for i := 1; i <= 6; i++ {
		qos := byte(1)
		if i == 3 {
			qos = 2
		}
		r.send(&packets.Publish{QoS: qos, PacketID: uint16(i), Topic: "t", Payload: []byte{byte(i)}})
	}
	testutil.WaitFor(t, 5*time.Second, "4 publishes in flight", func() bool { return hb.count() == 4 })
	r.nothing(100 * time.Millisecond)
	if hb.count() != 4 {
		t.Fatalf("%d publishes handed to the backend, receive maximum is 4", hb.count())
	}
	// Complete 4, 3, 2: nothing may be acknowledged while 1 is pending.
	hb.release([]int{3, 2, 1}, map[int]error{1: ErrNotAuthorized})
	r.nothing(100 * time.Millisecond)
	hb.release([]int{0}, nil)
	want := []struct {
		qos  byte
		code packets.ReasonCode
	}{{1, 0}, {1, packets.ReasonNotAuthorized}, {2, 0}, {1, 0}}
	for i, w := range want {
		p := r.recv()
		var id uint16
		var code packets.ReasonCode
		switch a := p.(type) {
		case *packets.Puback:
			id, code = a.PacketID, a.ReasonCode
			if w.qos != 1 {
				t.Fatalf("ack %d: PUBACK, want PUBREC", i+1)
			}
		case *packets.Pubrec:
			id, code = a.PacketID, a.ReasonCode
			if w.qos != 2 {
				t.Fatalf("ack %d: PUBREC, want PUBACK", i+1)
			}
		default:
			t.Fatalf("ack %d: got %T", i+1, p)
		}
		if id != uint16(i+1) || code != w.code {
			t.Fatalf("ack %d: id %d code %v, want id %d code %v", i+1, id, code, i+1, w.code)
		}
	}
	// The worker resumed: the last two publishes reach the backend.
	testutil.WaitFor(t, 5*time.Second, "parked publishes resumed", func() bool { return hb.count() == 6 })
	hb.release([]int{5, 4}, nil)
	for i := 5; i <= 6; i++ {
		if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != uint16(i) {
			t.Fatalf("ack %d: %+v", i, a)
		}
	}
	r.send(&packets.Pubrel{PacketID: 3})
	if c, ok := r.recv().(*packets.Pubcomp); !ok || c.ReasonCode != 0 {
		t.Fatalf("PUBCOMP %+v", c)
	}
}

// TestPublishAsyncQoS2Duplicate: a DUP of a QoS 2 PUBLISH still being
// stored is not stored again and gets one PUBREC.
func TestPublishAsyncQoS2Duplicate(t *testing.T) {
	hb, addr := startHeld(t, 16)
	r := connected(t, addr, v5, "dup2")
	r.send(&packets.Publish{QoS: 2, PacketID: 9, Topic: "t", Payload: []byte("x")})
	testutil.WaitFor(t, 5*time.Second, "publish in flight", func() bool { return hb.count() == 1 })
	r.send(&packets.Publish{QoS: 2, PacketID: 9, Dup: true, Topic: "t", Payload: []byte("x")})
	r.send(&packets.Pingreq{})
	if _, ok := r.recv().(*packets.Pingresp); !ok {
		t.Fatal("want PINGRESP")
	}
	if hb.count() != 1 {
		t.Fatalf("duplicate stored again: %d publishes", hb.count())
	}
	hb.release([]int{0}, nil)
	if a, ok := r.recv().(*packets.Pubrec); !ok || a.PacketID != 9 {
		t.Fatalf("PUBREC %+v", a)
	}
	r.nothing(100 * time.Millisecond)
}

// TestPublishAsyncV311FailureCloses: a 3.1.1 client whose publish fails
// in the backend is disconnected (it has no negative acknowledgement).
func TestPublishAsyncV311FailureCloses(t *testing.T) {
	hb, addr := startHeld(t, 16)
	r := connected(t, addr, v311, "old")
	r.send(&packets.Publish{QoS: 1, PacketID: 1, Topic: "t", Payload: []byte("x")})
	testutil.WaitFor(t, 5*time.Second, "publish in flight", func() bool { return hb.count() == 1 })
	hb.release([]int{0}, map[int]error{0: errors.New("broker down")})
	if code := r.closed(); code != -1 {
		t.Fatalf("3.1.1 got DISCONNECT %d", code)
	}
}
