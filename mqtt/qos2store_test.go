package mqtt

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// startHeldServer is startHeld returning the server too.
func startHeldServer(t *testing.T) (*heldBackend, *Server, string) {
	t.Helper()
	hb := &heldBackend{MemoryBackend: NewMemoryBackend()}
	opts := DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	s := serveBackendServer(t, opts, hb)
	return hb, s, s.Addrs()[0].String()
}

// connectPersistent connects id (v5, session expiry 600 s) and returns the
// client and whether the session was present.
func connectPersistent(t *testing.T, addr, id string, clean bool) (*rawClient, bool) {
	t.Helper()
	r := dialRaw(t, addr, v5)
	cp := &packets.Connect{ClientID: id, CleanStart: clean, KeepAlive: 60}
	cp.Properties.SessionExpiry = 600
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	ack := r.connect(cp)
	if ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	return r, ack.SessionPresent
}

// TestQoS2DupWhileEarlierConnectionStores: a client's connection drops
// while the server stores its QoS 2 PUBLISH (no PUBREC yet); the client
// resumes the session and sends the PUBLISH again with DUP. The new
// connection does not store it again: it answers PUBREC once the first
// store completes, and the message is stored once. The DUP used to be
// stored a second time (the ids being stored were the connection's, not
// the session's), and subscribers got the message twice
// (interop/rocketmq TestInteropMQTTQoS2ResendBeforePubrec).
func TestQoS2DupWhileEarlierConnectionStores(t *testing.T) {
	hb, s, addr := startHeldServer(t)
	r1, _ := connectPersistent(t, addr, "dup", true)
	r1.send(&packets.Publish{QoS: 2, PacketID: 7, Topic: "q2/a", Payload: []byte("once")})
	testutil.WaitFor(t, 5*time.Second, "the store under way", func() bool { return hb.count() == 1 })
	r1.nc.Close()
	testutil.WaitFor(t, 5*time.Second, "the first connection gone", func() bool { return s.Stats().Clients.Load() == 0 })

	r2, present := connectPersistent(t, addr, "dup", false)
	if !present {
		t.Fatal("session not present")
	}
	r2.send(&packets.Publish{QoS: 2, PacketID: 7, Topic: "q2/a", Payload: []byte("once"), Dup: true})
	// A QoS 1 PUBLISH after it: handed to the backend, while the DUP
	// was not, and acknowledged only after the DUP's PUBREC (order).
	r2.send(&packets.Publish{QoS: 1, PacketID: 8, Topic: "q2/a", Payload: []byte("next")})
	testutil.WaitFor(t, 5*time.Second, "the QoS 1 publish handed over", func() bool { return hb.count() >= 2 })
	hb.mu.Lock()
	second := string(hb.held[1].msg.Payload)
	hb.mu.Unlock()
	if second != "next" {
		t.Fatalf("the backend's second publish is %q, want next (the DUP stored again)", second)
	}
	hb.release([]int{1}, nil)
	r2.nothing(100 * time.Millisecond) // the PUBREC of 7 comes first, after its store
	hb.release([]int{0}, nil)
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
	if n := hb.count(); n != 2 {
		t.Errorf("%d publishes handed to the backend, want 2", n)
	}
}

// TestQoS2EvictWaitsForStores: an eviction (another node takes the
// session) waits until the QoS 2 PUBLISH being stored is stored, and the
// state it hands on has its id among the received ones, so the client's
// DUP there is recognised. It used to hand on the state without it.
func TestQoS2EvictWaitsForStores(t *testing.T) {
	hb, s, addr := startHeldServer(t)
	r1, _ := connectPersistent(t, addr, "ev", true)
	r1.send(&packets.Publish{QoS: 2, PacketID: 9, Topic: "q2/a", Payload: []byte("x")})
	testutil.WaitFor(t, 5*time.Second, "the store under way", func() bool { return hb.count() == 1 })
	inst := s.SessionInstance("ev")
	got := make(chan *SessionState, 1)
	go func() {
		st, _ := s.Evict("ev", inst, EvictMoved)
		got <- st
	}()
	select {
	case st := <-got:
		t.Fatalf("eviction returned %+v while the store is under way", st)
	case <-time.After(100 * time.Millisecond):
	}
	hb.release([]int{0}, nil)
	select {
	case st := <-got:
		if st == nil || !slices.Contains(st.Received, 9) {
			t.Fatalf("evicted state %+v, want 9 received", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("eviction did not return after the store")
	}
}

// TestQoS2SaveAfterStores: the save of a session whose connection ended
// while it stored a QoS 2 PUBLISH waits for the store and has the id
// among the received ones; it used to be saved at once without it, and a
// node the client reconnected to resumed from that save and stored the
// DUP again.
func TestQoS2SaveAfterStores(t *testing.T) {
	hb, s, addr := startHeldServer(t)
	r1, _ := connectPersistent(t, addr, "sv", true)
	r1.send(&packets.Publish{QoS: 2, PacketID: 11, Topic: "q2/a", Payload: []byte("x")})
	testutil.WaitFor(t, 5*time.Second, "the store under way", func() bool { return hb.count() == 1 })
	r1.nc.Close()
	testutil.WaitFor(t, 5*time.Second, "the connection gone", func() bool { return s.Stats().Clients.Load() == 0 })
	if _, ok, _ := hb.LoadSession(context.Background(), "sv"); ok {
		t.Fatal("session saved while its QoS 2 store is under way")
	}
	hb.release([]int{0}, nil)
	testutil.WaitFor(t, 5*time.Second, "the session saved with 11 received", func() bool {
		st, ok, _ := hb.LoadSession(context.Background(), "sv")
		return ok && slices.Contains(st.Received, 11)
	})
}

// TestQoS2V311FailedStoreNotReceived: a 3.1.1 client's QoS 2 PUBLISH
// whose store fails is disconnected (3.1.1 has no negative PUBREC); the
// id is not taken as received, so the PUBLISH it sends again with DUP on
// its next connection is stored. It used to be answered as a duplicate
// (PUBREC, not stored): the message was lost.
func TestQoS2V311FailedStoreNotReceived(t *testing.T) {
	hb, _, addr := startHeldServer(t)
	r1 := dialRaw(t, addr, v311)
	if ack := r1.connect(&packets.Connect{ClientID: "fail311", KeepAlive: 60}); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	r1.send(&packets.Publish{QoS: 2, PacketID: 3, Topic: "q2/a", Payload: []byte("x")})
	testutil.WaitFor(t, 5*time.Second, "the store under way", func() bool { return hb.count() == 1 })
	hb.release([]int{0}, map[int]error{0: errors.New("broker down")})
	if code := r1.closed(); code != -1 {
		t.Fatalf("3.1.1 got DISCONNECT %d", code)
	}
	r2 := dialRaw(t, addr, v311)
	if ack := r2.connect(&packets.Connect{ClientID: "fail311", KeepAlive: 60}); ack.ReasonCode != 0 || !ack.SessionPresent {
		t.Fatalf("CONNACK %v present %v", ack.ReasonCode, ack.SessionPresent)
	}
	r2.send(&packets.Publish{QoS: 2, PacketID: 3, Topic: "q2/a", Payload: []byte("x"), Dup: true})
	testutil.WaitFor(t, 5*time.Second, "the DUP handed to the backend", func() bool { return hb.count() == 2 })
	hb.release([]int{1}, nil)
	if rec, ok := r2.recv().(*packets.Pubrec); !ok || rec.PacketID != 3 {
		t.Fatalf("want PUBREC 3, got %+v", rec)
	}
}
