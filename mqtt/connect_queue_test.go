package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// slowLoadBackend holds LoadSession of one client id until released.
type slowLoadBackend struct {
	*MemoryBackend
	slow    string
	entered chan struct{}
	release chan struct{}
}

func (b *slowLoadBackend) LoadSession(ctx context.Context, clientID string) (*SessionState, bool, error) {
	if clientID == b.slow {
		close(b.entered)
		<-b.release
	}
	return b.MemoryBackend.LoadSession(ctx, clientID)
}

// TestConnectTimeoutNotWhileLoadingTheSession: the connect timeout is
// for connections that send no CONNECT; one whose CONNECT arrived in time
// is not cut off while its session loads, however long that takes (a
// cluster backend under a reconnect storm after a restart). A connection
// that sends nothing is still closed meanwhile. It was cut off: after a
// restart with 500 persistent sessions resuming at once, 244 clients were
// disconnected with "no CONNECT within the connect timeout" while the
// bridge was loading their sessions.
func TestConnectTimeoutNotWhileLoadingTheSession(t *testing.T) {
	b := &slowLoadBackend{MemoryBackend: NewMemoryBackend(), slow: "slow", entered: make(chan struct{}), release: make(chan struct{})}
	opts := DefaultOptions()
	opts.ConnectTimeout = 100 * time.Millisecond
	logs := &testutil.LogBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	addr := serveBackend(t, opts, b)
	released := false
	defer func() {
		if !released {
			close(b.release)
		}
	}()

	slow := dialRaw(t, addr, packets.Version311)
	slow.send(&packets.Connect{ClientID: "slow", KeepAlive: 60}) // clean session 0: its session is loaded
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow client's session load did not start")
	}
	// A connection dialled after it that sends nothing is cut off by the
	// connect timeout: by then the slow client's timer has run too.
	silent := dialRaw(t, addr, packets.Version311)
	cut := "remote=" + silent.nc.LocalAddr().String() + " detail=\"no CONNECT within the connect timeout\""
	for end := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), cut); {
		if time.Now().After(end) {
			t.Fatalf("the silent connection was not cut off; log:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(b.release)
	released = true
	p, err := slow.next(10 * time.Second)
	if err != nil {
		t.Fatalf("the client whose session was loading was cut off: %v", err)
	}
	if ack, ok := p.(*packets.Connack); !ok || ack.ReasonCode != 0 {
		t.Fatalf("slow client: %T %+v", p, p)
	}
}

// hangingLoadBackend never answers LoadSession until its context ends.
type hangingLoadBackend struct {
	*MemoryBackend
	hang    atomic.Bool
	entered chan struct{}
}

func (b *hangingLoadBackend) LoadSession(ctx context.Context, clientID string) (*SessionState, bool, error) {
	if b.hang.Load() {
		b.entered <- struct{}{}
		<-ctx.Done()
		return nil, false, fmt.Errorf("hanging backend: %w", ctx.Err())
	}
	return b.MemoryBackend.LoadSession(ctx, clientID)
}

// TestSessionLoadTimeout: a backend that does not answer LoadSession
// holds a resuming CONNECT for SessionLoadTimeout, then the client gets
// CONNACK server unavailable (v5 0x88, v3.1.1 return code 3) and the
// connection is closed; once the backend answers again the client
// resumes. The CONNECT was held until the server stopped.
func TestSessionLoadTimeout(t *testing.T) {
	b := &hangingLoadBackend{MemoryBackend: NewMemoryBackend(), entered: make(chan struct{}, 4)}
	b.hang.Store(true)
	opts := DefaultOptions()
	opts.SessionLoadTimeout = 200 * time.Millisecond
	addr := serveBackend(t, opts, b)
	for _, tc := range []struct {
		v    packets.Version
		want packets.ReasonCode
	}{{packets.Version5, packets.ReasonServerUnavailable}, {packets.Version311, 3}} {
		c := dialRaw(t, addr, tc.v)
		cp := &packets.Connect{ClientID: "stuck", KeepAlive: 60}
		if tc.v == packets.Version5 {
			cp.Properties.Present.Add(packets.PropSessionExpiry)
			cp.Properties.SessionExpiry = 3600
		}
		c.send(cp)
		<-b.entered
		p, err := c.next(20 * time.Second)
		if err != nil {
			t.Fatalf("v%d: no CONNACK while the backend hangs: %v", tc.v, err)
		}
		if ack, ok := p.(*packets.Connack); !ok || ack.ReasonCode != tc.want {
			t.Fatalf("v%d: %T %+v, want CONNACK %#x", tc.v, p, p, tc.want)
		}
		if p, err := c.next(20 * time.Second); err == nil {
			t.Fatalf("v%d: connection open after the refusal: %T", tc.v, p)
		}
	}
	b.hang.Store(false)
	c := dialRaw(t, addr, packets.Version311)
	c.send(&packets.Connect{ClientID: "stuck", KeepAlive: 60})
	p, err := c.next(20 * time.Second)
	if err != nil {
		t.Fatalf("no CONNACK once the backend answers: %v", err)
	}
	if ack, ok := p.(*packets.Connack); !ok || ack.ReasonCode != 0 {
		t.Fatalf("once the backend answers: %T %+v", p, p)
	}
}
