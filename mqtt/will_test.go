package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// willBackend is a MemoryBackend that implements WillBackend: it reads
// the server's will of each client at ConnectedWill, as a backend
// storing wills does, and notes the published delayed wills.
type willBackend struct {
	*MemoryBackend
	srv       *Server
	mu        sync.Mutex
	connected map[string]Will // the will Server.Will gave at ConnectedWill
	clean     map[string]bool
	published []*Message
	owed      []Will // WillOwed's
}

func (w *willBackend) ConnectedWill(_ context.Context, clientID string, cleanStart bool) {
	wl, _ := w.srv.Will(clientID)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.connected[clientID], w.clean[clientID] = wl, cleanStart
}

func (w *willBackend) WillOwed(_ context.Context, _ string, wl Will) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.owed = append(w.owed, wl)
}

func (w *willBackend) WillPublished(_ context.Context, _ string, m *Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.published = append(w.published, m)
}

// newWillBackend is a willBackend over a fresh MemoryBackend.
func newWillBackend() *willBackend {
	return &willBackend{MemoryBackend: NewMemoryBackend(), connected: map[string]Will{}, clean: map[string]bool{}}
}

// startWillServer starts a server over be (wb: the willBackend be is or
// wraps, told of the server) on 127.0.0.1:0; Close runs at cleanup.
func startWillServer(t *testing.T, be Backend, wb *willBackend) *Server {
	t.Helper()
	opts := DefaultOptions()
	opts.Listen = []string{"127.0.0.1:0"}
	opts.Logger = slog.New(slog.DiscardHandler)
	s, err := NewServer(opts, be)
	if err != nil {
		t.Fatal(err)
	}
	wb.srv = s
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestServerWillForBackend: a WillBackend hears of each connection after
// its CONNACK, when Server.Will gives the connection's will; after the
// connection ends without DISCONNECT, Server.Will gives the running will
// delay's due time, and WillPublished follows the will's publication.
func TestServerWillForBackend(t *testing.T) {
	wb := newWillBackend()
	s := startWillServer(t, wb, wb)
	addr := s.Addrs()[0].String()

	c := dialRaw(t, addr, packets.Version5)
	cp := &packets.Connect{ClientID: "wd", KeepAlive: 60, WillFlag: true, WillQoS: 1, WillTopic: "will/wd", WillPayload: []byte("gone")}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 600
	cp.WillProperties.Present.Add(packets.PropWillDelay)
	cp.WillProperties.WillDelay = 1
	c.connect(cp)
	c.send(&packets.Pingreq{})
	if _, ok := c.recv().(*packets.Pingresp); !ok {
		t.Fatal("want PINGRESP")
	}
	wb.mu.Lock()
	w, clean := wb.connected["wd"], wb.clean["wd"]
	wb.mu.Unlock()
	if w.Msg == nil || w.Msg.Topic != "will/wd" || string(w.Msg.Payload) != "gone" || w.Delay != time.Second ||
		w.Expiry != 600*time.Second || !w.Due.IsZero() || clean {
		t.Fatalf("will at ConnectedWill: %+v clean=%v", w, clean)
	}
	before := time.Now()
	c.nc.Close()
	var due Will
	testutil.WaitFor(t, 10*time.Second, "the will delay running", func() bool {
		due, _ = s.Will("wd")
		return !due.Due.IsZero()
	})
	// The wheel counts the delay from the start of the tick (100 ms) it
	// was armed in: up to a tick before the connection ended.
	if due.Msg != w.Msg || due.Due.Before(before.Add(time.Second-100*time.Millisecond)) || due.Due.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("will after the connection ended: %+v", due)
	}
	testutil.WaitFor(t, 10*time.Second, "WillPublished", func() bool {
		wb.mu.Lock()
		defer wb.mu.Unlock()
		return len(wb.published) == 1 && wb.published[0] == w.Msg
	})
	if _, ok := s.Will("wd"); ok {
		t.Fatal("Server.Will after the will went out")
	}
}

// refusingWills is a willBackend whose Publish fails its first fails
// tries (every try when fails is negative) with err.
type refusingWills struct {
	*willBackend
	fails int32
	err   error
	tries atomic.Int32
}

func (f *refusingWills) Publish(ctx context.Context, m *Message) error {
	if n := f.tries.Add(1); f.fails < 0 || n <= f.fails {
		return f.err
	}
	return f.willBackend.Publish(ctx, m)
}

// errStoreUnavailable is a failure a later try may not meet.
var errStoreUnavailable = errors.New("store unavailable")

// TestServerWillPublishFailedNotSettled: a delayed will whose publish
// fails is not reported to the WillBackend as published. It was: the
// bridge then wrote the marker that settles the stored will, and no
// other node published it after this one died (a will lost whenever
// the publish failed, such as in a node's last moments).
func TestServerWillPublishFailedNotSettled(t *testing.T) {
	fb := &refusingWills{willBackend: newWillBackend(), fails: -1, err: errStoreUnavailable}
	s := startWillServer(t, fb, fb.willBackend)
	c := connectWithWill(t, s, "wf", 600, 1)
	c.nc.Close()
	testutil.WaitFor(t, 10*time.Second, "the will's publish tried", func() bool { return fb.tries.Load() > 0 })
	s.Close() // waits for the timer that fired the will
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.published) != 0 {
		t.Fatalf("WillPublished after the publish failed: %v", fb.published)
	}
}

// connectWithWill connects a v5 client id to s with a QoS 1 will on
// will/<id> (session expiry and will delay in seconds, 0: none) and
// waits for a PINGRESP: the connection is in place.
func connectWithWill(t *testing.T, s *Server, id string, expiry, delay uint32) *rawClient {
	t.Helper()
	cl := dialRaw(t, s.Addrs()[0].String(), packets.Version5)
	cp := &packets.Connect{ClientID: id, KeepAlive: 60, WillFlag: true, WillQoS: 1, WillTopic: "will/" + id,
		WillPayload: []byte("gone")}
	if expiry > 0 {
		cp.Properties.Present.Add(packets.PropSessionExpiry)
		cp.Properties.SessionExpiry = expiry
	}
	if delay > 0 {
		cp.WillProperties.Present.Add(packets.PropWillDelay)
		cp.WillProperties.WillDelay = delay
	}
	cl.connect(cp)
	cl.send(&packets.Pingreq{})
	if _, ok := cl.recv().(*packets.Pingresp); !ok {
		t.Fatal("want PINGRESP")
	}
	return cl
}

// TestServerWillPublishFailedRetried: a will whose publish fails (no
// delay with a session that ends or stays, a delayed one, one published
// at session expiry) stays owed: Server.Will gives it (no delay, due at
// its next try) while the server tries it again, a WillOwer is told once
// (WillOwed), and once it went out WillPublished settles it. Before, such a will was dropped: the records
// the server wrote next (the session's delete or offline save) settled
// it, and nothing tried it again.
func TestServerWillPublishFailedRetried(t *testing.T) {
	for _, c := range []struct {
		name          string
		expiry, delay uint32
	}{
		{"no delay, session ends", 0, 0},
		{"no delay, session stays", 600, 0},
		{"delayed", 600, 1},
		{"at session expiry", 1, 60},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fb := &refusingWills{willBackend: newWillBackend(), fails: 2, err: errStoreUnavailable}
			s := startWillServer(t, fb, fb.willBackend)
			cl := connectWithWill(t, s, "wr", c.expiry, c.delay)
			fb.mu.Lock()
			msg := fb.connected["wr"].Msg
			fb.mu.Unlock()
			cl.nc.Close()
			// Owed from the first failed try until the third goes out
			// (a second, then 2 s more).
			testutil.WaitFor(t, 10*time.Second, "the will owed after a failed publish", func() bool {
				w, ok := s.Will("wr")
				return ok && w.Msg == msg && w.Delay == 0 && !w.Due.IsZero() && fb.tries.Load() >= 1
			})
			testutil.WaitFor(t, 20*time.Second, "WillPublished after the tries", func() bool {
				fb.mu.Lock()
				defer fb.mu.Unlock()
				return len(fb.published) == 1 && fb.published[0] == msg
			})
			if n := fb.tries.Load(); n != 3 {
				t.Fatalf("tries %d, want 3 (two failed)", n)
			}
			fb.mu.Lock()
			owed := fb.owed
			fb.mu.Unlock()
			if len(owed) != 1 || owed[0].Msg != msg || !owed[0].Owed || owed[0].Due.IsZero() {
				t.Fatalf("WillOwed calls %+v, want one with the owed will", owed)
			}
			if _, ok := s.Will("wr"); ok {
				t.Fatal("Server.Will after the will went out")
			}
		})
	}
}

// TestServerWillUnstorableNotOwed: a will the backend refuses for good
// (ErrUnstorable) is not kept owed: Server.Will no longer gives it once
// the connection ended, and a delayed one is settled (WillPublished) as
// a will that is done. Before, such a will was tried again every 30 s
// for as long as the server ran, each kept in memory: a client that
// connected with one and dropped its connection, again and again, grew
// the server's memory without bound.
func TestServerWillUnstorableNotOwed(t *testing.T) {
	for _, c := range []struct {
		name          string
		expiry, delay uint32
	}{
		{"no delay, session ends", 0, 0},
		{"no delay, session stays", 600, 0},
		{"delayed", 600, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Refused as no retry can cure (as a bridge refuses a topic
			// holding 0x01).
			ub := &refusingWills{willBackend: newWillBackend(), fails: -1, err: fmt.Errorf("test refusal: %w", ErrUnstorable)}
			s := startWillServer(t, ub, ub.willBackend)
			cl := connectWithWill(t, s, "wu", c.expiry, c.delay)
			cl.nc.Close()
			testutil.WaitFor(t, 10*time.Second, "the will tried", func() bool { return ub.tries.Load() >= 1 })
			if w, ok := s.Will("wu"); ok {
				t.Fatalf("a will refused for good is owed: %+v", w)
			}
			ub.mu.Lock()
			owed := len(ub.owed)
			ub.mu.Unlock()
			if owed != 0 {
				t.Fatalf("WillOwed called %d times for a will refused for good", owed)
			}
			if c.delay > 0 {
				testutil.WaitFor(t, 10*time.Second, "the refused delayed will settled", func() bool {
					ub.mu.Lock()
					defer ub.mu.Unlock()
					return len(ub.published) == 1
				})
			}
			s.retries.mu.Lock()
			n := len(s.retries.owed)
			s.retries.mu.Unlock()
			if n != 0 {
				t.Fatalf("%d clients' wills kept for another try", n)
			}
		})
	}
}
