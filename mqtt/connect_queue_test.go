package mqtt

import (
	"context"
	"log/slog"
	"strings"
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
