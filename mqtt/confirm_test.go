package mqtt

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// confirmBackend is a MemoryBackend whose SessionConfirmer answer the test
// sets: superseded deletes the stored session first (another node's clean
// start, as the cluster would have it), failing returns an error.
type confirmBackend struct {
	*MemoryBackend
	superseded, failing atomic.Bool
	asked               atomic.Int32
}

func (b *confirmBackend) SessionCurrent(ctx context.Context, clientID string) (bool, error) {
	b.asked.Add(1)
	if b.failing.Load() {
		return false, errors.New("session topic unreachable")
	}
	if b.superseded.Load() {
		return false, b.MemoryBackend.DeleteSession(ctx, clientID)
	}
	return true, nil
}

// TestServerConfirmsInMemoryResume: a resume of a session the server
// holds offline in memory asks the SessionConfirmer. Current: resumed
// from memory, session present, its subscription delivering. An error:
// CONNACK 0x88 and the session stays. Superseded: the copy ends and the
// connect loads the session from the backend (here none: session present
// 0, the old subscription gone). A clean start or a session held by a
// connection does not ask.
func TestServerConfirmsInMemoryResume(t *testing.T) {
	be := &confirmBackend{MemoryBackend: NewMemoryBackend()}
	srv := serveBackendServer(t, DefaultOptions(), be)
	addr := srv.Addrs()[0].String()
	cp := &packets.Connect{ClientID: "c1", KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 600
	offline := func(r *rawClient) {
		t.Helper()
		r.nc.Close()
		testutil.WaitFor(t, 10*time.Second, "the session offline", func() bool {
			return !srv.Connected("c1") && srv.SessionInstance("c1") != 0
		})
	}
	pub := connected(t, addr, v5, "pub")
	delivers := func(r *rawClient, id uint16) {
		t.Helper()
		pub.publish1(id, "t/1", "m")
		if got := r.expectPublish(); got.Topic != "t/1" {
			t.Fatalf("got %s", got.Topic)
		}
	}

	r := dialRaw(t, addr, v5)
	r.connect(cp)
	r.subscribe(1, sub("t/1", 1))
	if n := be.asked.Load(); n != 0 {
		t.Fatalf("a new session asked %d times", n)
	}
	offline(r)
	r = dialRaw(t, addr, v5)
	if ack := r.connect(cp); ack.ReasonCode != 0 || !ack.SessionPresent || be.asked.Load() != 1 {
		t.Fatalf("current: CONNACK %v present %v, asked %d times", ack.ReasonCode, ack.SessionPresent, be.asked.Load())
	}
	delivers(r, 1) // resumed from memory
	// Taken over while connected: nothing to ask.
	r2 := dialRaw(t, addr, v5)
	if ack := r2.connect(cp); !ack.SessionPresent || be.asked.Load() != 1 {
		t.Fatalf("takeover on this server: present %v, asked %d times", ack.SessionPresent, be.asked.Load())
	}
	r.closed()

	offline(r2)
	be.failing.Store(true)
	r = dialRaw(t, addr, v5)
	if ack := r.connect(cp); ack.ReasonCode != packets.ReasonServerUnavailable {
		t.Fatalf("confirmation failing: CONNACK %v, want 0x88", ack.ReasonCode)
	}
	be.failing.Store(false)
	r = dialRaw(t, addr, v5)
	if ack := r.connect(cp); !ack.SessionPresent {
		t.Fatal("the session did not stay after the failed confirmation")
	}
	delivers(r, 2)

	offline(r)
	be.superseded.Store(true)
	r = dialRaw(t, addr, v5)
	if ack := r.connect(cp); ack.ReasonCode != 0 || ack.SessionPresent {
		t.Fatalf("superseded: CONNACK %v present %v, want a new session", ack.ReasonCode, ack.SessionPresent)
	}
	pub.publish1(3, "t/1", "old subscription")
	r.nothing(300 * time.Millisecond)
}
