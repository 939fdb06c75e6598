package bridge

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// TestBridgeWillOwedMarkerWriteFailsOnce: a client's will fails to
// publish (a fault hook) and the will-owed marker's first write fails
// too (another hook); the node writes it again. The client reconnects to
// that node with another will, and the node crashes: both wills go out
// once, from the other node. Before, the failed marker was only logged:
// the new connection's records settled the first will and the crash lost
// it.
func TestBridgeWillOwedMarkerWriteFailsOnce(t *testing.T) {
	c := startCluster(t)
	var oweWrites, oweStored atomic.Int32
	a := startBridgeWith(t, c, quickLooks, func(b *Bridge) {
		b.Backend().testPublishHook = func(m *mqtt.Message) error {
			if m.ClientID != "om" || m.Topic != "will/om" {
				return nil
			}
			return errors.New("store unavailable (test)")
		}
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if !rec.Owe {
				return send()
			}
			if oweWrites.Add(1) == 1 {
				return errors.New("store unavailable (test)")
			}
			err := send()
			if err == nil {
				oweStored.Add(1)
			}
			return err
		}
	})
	b := startBridge(t, c, quickLooks)
	owedOverReconnect(t, c, a, b, "om", func() bool { return oweWrites.Load() >= 2 && oweStored.Load() >= 1 })
}

// owedOverReconnect: client id of node a, whose will's publish fails,
// disconnects; once stored holds it reconnects to a with another will,
// and a crashes: both wills must go out once, from node b.
func owedOverReconnect(t *testing.T, c *cluster.Cluster, a, b *Bridge, id string, stored func() bool) {
	t.Helper()
	wills := willsOn(t, c)
	first := willConnectSaying(t, addrOf(a), id, true, 0, 0, "first")
	testutil.WaitFor(t, 60*time.Second, "the first will stored", func() bool { return owedSaying(b, id, "first") })
	first.nc.Close()
	testutil.WaitFor(t, 60*time.Second, "the will-owed marker stored", stored)
	willConnectSaying(t, addrOf(a), id, true, 0, 0, "second")
	testutil.WaitFor(t, 60*time.Second, "the second will stored", func() bool { return owedSaying(b, id, "second") })
	crash(t, a)
	want := "will/" + id + "=first,will/" + id + "=second"
	if got := strings.Join(slices.Sorted(slices.Values(wills(2, 2*time.Second))), ","); got != want {
		t.Fatalf("wills published: %s, want %s", got, want)
	}
}

// willWrapper is a WrapBackend hook that forwards the server's session,
// QoS 2, will and share calls to the bridge's backend, but is no
// mqtt.WillOwer.
type willWrapper struct {
	mqtt.Backend
	be *Backend
}

func (w *willWrapper) SaveSubscriptions(ctx context.Context, st *mqtt.SessionState) error {
	return w.be.SaveSubscriptions(ctx, st)
}
func (w *willWrapper) RecordQoS2(clientID string, done func()) { w.be.RecordQoS2(clientID, done) }
func (w *willWrapper) PrepareShares(ctx context.Context, clientID string, filters []string) {
	w.be.PrepareShares(ctx, clientID, filters)
}
func (w *willWrapper) ConnectedWill(ctx context.Context, clientID string, cleanStart bool) {
	w.be.ConnectedWill(ctx, clientID, cleanStart)
}
func (w *willWrapper) WillPublished(ctx context.Context, clientID string, m *mqtt.Message) {
	w.be.WillPublished(ctx, clientID, m)
}

// TestBridgeWrappedBackendOwesWills: a WrapBackend hook that forwards
// every optional interface of the server but mqtt.WillOwer does not cost
// the will-owed markers: a will whose publish failed stays owed over the
// client's reconnect and goes out once from the other node when its node
// crashes. Before, the server found no WillOwer, wrote no marker, and
// the crash lost the will.
func TestBridgeWrappedBackendOwesWills(t *testing.T) {
	c := startCluster(t)
	var owe atomic.Int32
	a := startBridgeWith(t, c, func(mo *mqtt.Options, bo *Options) {
		quickLooks(mo, bo)
		bo.WrapBackend = func(be mqtt.Backend) mqtt.Backend { return &willWrapper{Backend: be, be: be.(*Backend)} }
	}, func(b *Bridge) {
		b.Backend().testPublishHook = func(m *mqtt.Message) error {
			if m.ClientID != "ww" || m.Topic != "will/ww" {
				return nil
			}
			return errors.New("store unavailable (test)")
		}
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			err := send()
			if err == nil && rec.Owe {
				owe.Add(1)
			}
			return err
		}
	})
	b := startBridge(t, c, quickLooks)
	owedOverReconnect(t, c, a, b, "ww", func() bool { return owe.Load() >= 1 })
}
