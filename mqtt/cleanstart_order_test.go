package mqtt

import (
	"context"
	"crypto/tls"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// heldDeleteBackend holds back DeleteSession once armed, until released.
type heldDeleteBackend struct {
	*MemoryBackend
	armed            atomic.Bool
	entered, release chan struct{}
}

func (b *heldDeleteBackend) DeleteSession(ctx context.Context, id string) error {
	if b.armed.CompareAndSwap(true, false) {
		close(b.entered)
		<-b.release
	}
	return b.MemoryBackend.DeleteSession(ctx, id)
}

// TestServerCleanStartConnackAfterDelete: the CONNACK of a clean start
// leaves only once the backend has recorded the clean start
// (DeleteSession returned): a client that reconnects elsewhere the moment
// it has the CONNACK finds the new session there, not the one before it
// (the bridge's TestBridgeCleanStartHandedOverAtOnce). While the backend
// call is held, the connection gets nothing, and other clients connect,
// publish and get their messages. Over TCP and TLS, 3.1.1 and 5.
func TestServerCleanStartConnackAfterDelete(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	for _, tc := range []struct {
		name string
		v    packets.Version
		tls  bool
	}{{"tcp-3.1.1", v311, false}, {"tcp-5", v5, false}, {"tls-3.1.1", v311, true}, {"tls-5", v5, true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &heldDeleteBackend{MemoryBackend: NewMemoryBackend(), entered: make(chan struct{}), release: make(chan struct{})}
			opts := DefaultOptions()
			opts.Logger = slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil))
			opts.TLSListen = []string{"127.0.0.1:0"}
			opts.TLSCertFile, opts.TLSKeyFile = cert, key
			s := serveBackendServer(t, opts, b)
			addr := s.Addrs()[0].String()
			release := sync.OnceFunc(func() { close(b.release) })
			t.Cleanup(release) // before the server's close

			b.armed.Store(true)
			var r *rawClient
			if tc.tls {
				nc, err := tls.Dial("tcp", s.Addrs()[1].String(), &tls.Config{InsecureSkipVerify: true})
				if err != nil {
					t.Fatal(err)
				}
				r = wrapRaw(t, nc, tc.v)
			} else {
				r = dialRaw(t, addr, tc.v)
			}
			r.send(&packets.Connect{ClientID: "held", CleanStart: true, KeepAlive: 60})
			select {
			case <-b.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the clean start never reached the backend")
			}

			// The rest of the server goes on meanwhile.
			sub := connected(t, addr, tc.v, "other-sub")
			sub.subscribe(1, packets.Subscription{Filter: "o/#", QoS: 1})
			pub := connected(t, addr, tc.v, "other-pub")
			pub.publish1(1, "o/a", "x")
			if p := sub.expectPublish(); string(p.Payload) != "x" {
				t.Fatalf("other subscriber got %q", p.Payload)
			}
			r.nothing(200 * time.Millisecond)

			release()
			p, err := r.next(10 * time.Second)
			if err != nil {
				t.Fatalf("no CONNACK after the backend recorded the clean start: %v", err)
			}
			if ack, ok := p.(*packets.Connack); !ok || ack.ReasonCode != 0 || ack.SessionPresent {
				t.Fatalf("want CONNACK accepted, no session present; got %T %+v", p, p)
			}
		})
	}
}
