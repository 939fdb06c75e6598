package statestore

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	aiomqtt "github.com/Azure/iot-operations-sdks/go/mqtt"
	"github.com/Azure/iot-operations-sdks/go/protocol"
	"github.com/Azure/iot-operations-sdks/go/services/statestore"
	ssErrors "github.com/Azure/iot-operations-sdks/go/services/statestore/errors"

	"github.com/smartgo/smartgo/internal/testutil"
)

// azureClient connects the Azure IoT Operations Go state store client
// (services v0.4.1, protocol v0.4.3, mqtt v0.4.2) to the environment.
//
// The state store client is made only once the session's first connection
// has been announced. statestore.New registers a connect handler that, on
// every connect event (each run in a goroutine of its own), sends KEYNOTIFY
// again for every watched key, GETs the key and hands the watcher a
// notification made up from that GET (SET with the current value, or DELETE
// with a zero version). Registered before the first connect event, that
// handler could run after the test's own KEYNOTIFY and give the watcher a
// notification SmartGo never sent. The session's handler list is iterated
// under a read lock, so a handler registered after ours has fired cannot
// see the first connect event.
func azureClient(t *testing.T, e *env, id string) *statestore.Client[string, string] {
	t.Helper()
	return azureClientAt(t, e.addr, id)
}

// azureClientAt is azureClient on the MQTT server at addr.
func azureClientAt(t *testing.T, addr, id string) *statestore.Client[string, string] {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	mc, err := aiomqtt.NewSessionClient(id, aiomqtt.TCPConnection(host, uint16(p)))
	if err != nil {
		t.Fatal(err)
	}
	connected := make(chan struct{})
	var once sync.Once
	unregister := mc.RegisterConnectEventHandler(func(*aiomqtt.ConnectEvent) { once.Do(func() { close(connected) }) })
	if err := mc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Stop() })
	select {
	case <-connected:
		unregister()
	case <-ctx10(t).Done():
		t.Fatalf("%s: no connection", id)
	}
	app, err := protocol.NewApplication()
	if err != nil {
		t.Fatal(err)
	}
	c, err := statestore.New[string, string](app, mc)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestStateStoreAzureSDKInterop(t *testing.T) {
	e := startEnv(t, false)
	ctx := ctx10(t)
	c := azureClient(t, e, "azure-client-1")
	w := azureClient(t, e, "azure-watcher")

	// Notifications: the Go SDK never subscribes; they are pushed. The
	// second KEYNOTIFY is what the SDK sends after every reconnect: it must
	// not make SmartGo notify a change twice (checked by the notification
	// order below and the last SET).
	ch, stop := w.Notify("k1")
	defer stop()
	for range 2 {
		if err := w.KeyNotify(ctx, "k1"); err != nil {
			t.Fatalf("keynotify: %v", err)
		}
	}

	set, err := c.Set(ctx, "k1", "v1")
	if err != nil || !set.Value || set.Version.IsZero() {
		t.Fatalf("set: %+v %v", set, err)
	}
	get, err := c.Get(ctx, "k1")
	if err != nil || get.Value != "v1" || get.Version.Compare(set.Version) != 0 {
		t.Fatalf("get: %+v %v", get, err)
	}
	select {
	case n := <-ch:
		if n.Operation != "SET" || n.Value != "v1" || n.Key != "k1" || n.Version.Compare(set.Version) != 0 {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no SET notification")
	}

	// NX on an existing key: not applied, current version returned.
	nx, err := c.Set(ctx, "k1", "v2", statestore.WithCondition(statestore.NotExists))
	if err != nil || nx.Value || nx.Version.Compare(set.Version) != 0 {
		t.Fatalf("set nx: %+v %v", nx, err)
	}
	// NEX with the same value applies.
	nex, err := c.Set(ctx, "k1", "v1", statestore.WithCondition(statestore.NotExistsOrEqual))
	if err != nil || !nex.Value {
		t.Fatalf("set nex: %+v %v", nex, err)
	}
	select {
	case n := <-ch:
		if n.Operation != "SET" || n.Value != "v1" || n.Version.Compare(nex.Version) != 0 {
			t.Fatalf("NEX notification %+v, want SET v1 %v", n, nex.Version)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no NEX notification")
	}

	// VDEL with the wrong value, then the right one.
	vd, err := c.VDel(ctx, "k1", "nope")
	if err != nil || vd.Value != -1 {
		t.Fatalf("vdel mismatch: %+v %v", vd, err)
	}
	vd, err = c.VDel(ctx, "k1", "v1")
	if err != nil || vd.Value != 1 {
		t.Fatalf("vdel: %+v %v", vd, err)
	}
	select {
	case n := <-ch:
		if n.Operation != "DELETE" {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no DELETE notification")
	}
	get, err = c.Get(ctx, "k1")
	if err != nil || get.Value != "" || !get.Version.IsZero() {
		t.Fatalf("get after vdel: %+v %v", get, err)
	}
	del, err := c.Del(ctx, "k1")
	if err != nil || del.Value != 0 {
		t.Fatalf("del missing: %+v %v", del, err)
	}
	// The next notification is this SET's: nothing was sent twice and the
	// DEL of a missing key changed nothing.
	again, err := c.Set(ctx, "k1", "v3")
	if err != nil || !again.Value {
		t.Fatalf("set again: %+v %v", again, err)
	}
	select {
	case n := <-ch:
		if n.Operation != "SET" || n.Value != "v3" || n.Version.Compare(again.Version) != 0 {
			t.Fatalf("notification %+v, want SET v3 %v", n, again.Version)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no SET notification for v3")
	}

	// PX expiry.
	if _, err := c.Set(ctx, "px", "x", statestore.WithExpiry(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "px key to expire", func() bool {
		g, err := c.Get(ctx, "px")
		return err == nil && g.Version.IsZero()
	})

	// Lock with fencing: SET lock holder NEX PX, token = version.
	lock, err := c.Set(ctx, "lock", "holder-1", statestore.WithCondition(statestore.NotExistsOrEqual), statestore.WithExpiry(10*time.Second))
	if err != nil || !lock.Value {
		t.Fatalf("lock: %+v %v", lock, err)
	}
	other, err := c.Set(ctx, "lock", "holder-2", statestore.WithCondition(statestore.NotExistsOrEqual), statestore.WithExpiry(10*time.Second))
	if err != nil || other.Value {
		t.Fatalf("second holder got the lock: %+v %v", other, err)
	}
	if _, err := c.Set(ctx, "res", "a", statestore.WithFencingToken(lock.Version)); err != nil {
		t.Fatalf("fenced set: %v", err)
	}
	_, err = c.Set(ctx, "res", "b")
	if !errors.Is(err, ssErrors.MissingFencingToken) {
		t.Fatalf("unfenced set on fenced key: %v", err)
	}
	old := set.Version // older than the lock's version
	if _, err := c.Set(ctx, "res", "c", statestore.WithFencingToken(old)); !errors.Is(err, ssErrors.FencingTokenLowerVersion) {
		t.Fatalf("stale fenced set: %v", err)
	}
	if _, err := c.Del(ctx, "res", statestore.WithFencingToken(lock.Version)); err != nil {
		t.Fatalf("fenced del: %v", err)
	}
	if r, err := c.VDel(ctx, "lock", "holder-1"); err != nil || r.Value != 1 {
		t.Fatalf("unlock: %+v %v", r, err)
	}
}
