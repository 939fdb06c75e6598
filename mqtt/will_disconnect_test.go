package mqtt

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// holdClose is a log handler that holds the goroutine closing client's
// connection at its "client disconnected" line (written once the socket
// is shut, before the session's disconnect handling) until release is
// closed: the close of a connection stopped at the worst moment, as a
// preempted goroutine on a loaded machine is. reached is closed when it
// holds.
type holdClose struct {
	client  string
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (h *holdClose) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdClose) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdClose) WithGroup(string) slog.Handler            { return h }

func (h *holdClose) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "mqtt: client disconnected" {
		return nil
	}
	ours := false
	r.Attrs(func(a slog.Attr) bool {
		ours = ours || a.Key == "client" && a.Value.String() == h.client
		return true
	})
	if !ours {
		return nil
	}
	held := false
	h.once.Do(func() { held = true })
	if held {
		close(h.reached)
		<-h.release
	}
	return nil
}

// TestServerWillDroppedByDisconnectBeforeClose: a client that sent a
// normal DISCONNECT and connects again as soon as it sees the server
// close the socket takes over a session whose will is gone: the will
// is never published, however late the rest of the first connection's
// close runs (held here right after the socket is shut). Before the fix
// the will was dropped after the socket closed, and the new
// connection's takeover published it (a CI flake of
// TestInteropMQTTWillAcrossKill9: the will of a client that had
// disconnected normally reached a persistent subscriber).
func TestServerWillDroppedByDisconnectBeforeClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v     packets.Version
		clean bool
	}{
		{"v5 clean start", packets.Version5, true},
		{"v5 resume", packets.Version5, false},
		{"v311 clean session", packets.Version311, true},
		{"v311 resume", packets.Version311, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &holdClose{client: "bye", reached: make(chan struct{}), release: make(chan struct{})}
			ts := startServer(t, func(o *Options) { o.Logger = slog.New(h) })
			// Before the server's Close (cleanups run last first).
			t.Cleanup(func() {
				select {
				case <-h.release:
				default:
					close(h.release)
				}
			})
			watcher := connected(t, ts.addr, packets.Version5, "watcher")
			watcher.subscribe(1, sub("will/#", 1))

			connect := func(will bool) *rawClient {
				c := dialRaw(t, ts.addr, tc.v)
				cp := &packets.Connect{ClientID: "bye", CleanStart: tc.clean, KeepAlive: 60}
				if !tc.clean && tc.v == packets.Version5 {
					cp.Properties.SessionExpiry = 600
					cp.Properties.Present.Add(packets.PropSessionExpiry)
				}
				if will {
					cp.WillFlag, cp.WillQoS, cp.WillTopic, cp.WillPayload = true, 1, "will/bye", []byte("offline bye")
				}
				if ack := c.connect(cp); ack.ReasonCode != 0 {
					t.Fatalf("CONNACK %v", ack.ReasonCode)
				}
				return c
			}
			bye := connect(true)
			bye.send(&packets.Disconnect{})
			if p, err := bye.next(10 * time.Second); !errors.Is(err, io.EOF) {
				t.Fatalf("after DISCONNECT: %T %v %v", p, p, err)
			}
			select {
			case <-h.reached:
			case <-time.After(10 * time.Second):
				t.Fatal("the close of the first connection was not held")
			}

			// The first connection's close is held: the new connection
			// finds its session still attached to it.
			again := connect(false)
			again.publish1(1, "will/marker", "after")
			pub := watcher.expectPublish()
			if pub.Topic != "will/marker" {
				t.Fatalf("first message to the watcher: %s %q, want will/marker (the will of a normal DISCONNECT went out)",
					pub.Topic, pub.Payload)
			}
			close(h.release)
			again.send(&packets.Disconnect{})
			if _, err := again.next(10 * time.Second); !errors.Is(err, io.EOF) {
				t.Fatalf("after the second DISCONNECT: %v", err)
			}
			// Neither close publishes it late: a message published
			// after both comes next.
			if pub.QoS > 0 {
				watcher.send(&packets.Puback{PacketID: pub.PacketID})
			}
			connected(t, ts.addr, packets.Version5, "pub").publish1(1, "will/marker", "last")
			if pub := watcher.expectPublish(); pub.Topic != "will/marker" || string(pub.Payload) != "last" {
				t.Fatalf("after both closes: %s %q", pub.Topic, pub.Payload)
			}
		})
	}
}
