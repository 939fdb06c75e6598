package statestore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/iot-operations-sdks/go/protocol/hlc"
	"github.com/Azure/iot-operations-sdks/go/services/statestore"

	"github.com/smartgo/smartgo/broker"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	ssengine "github.com/smartgo/smartgo/statestore"
)

// KEYNOTIFY registrations live in the memory of the broker that owns the
// key's shard. These tests watch keys with the Azure IoT Operations Go
// client through a front whose MQTT connection to the client stays up
// (so the client never re-registers by itself, as it would after a
// reconnect) while the broker side loses the registrations: the master
// is killed and the controller promotes a slave, or the broker closes
// the front's idle connection. The client must keep getting a
// notification for every change committed afterwards.

// azureWatch collects the notifications of an Azure client's watched
// keys.
type azureWatch struct {
	mu   sync.Mutex
	got  map[string][]statestore.Notify[string, string]
	stop []func()
}

func newAzureWatch(t *testing.T) *azureWatch {
	w := &azureWatch{got: map[string][]statestore.Notify[string, string]{}}
	t.Cleanup(func() {
		for _, s := range w.stop {
			s()
		}
	})
	return w
}

// follow starts collecting c's notifications for key (KeyNotify is sent
// separately).
func (w *azureWatch) follow(c *statestore.Client[string, string], key string) {
	ch, stop := c.Notify(key)
	w.stop = append(w.stop, stop)
	go func() {
		for n := range ch {
			w.mu.Lock()
			w.got[key] = append(w.got[key], n)
			w.mu.Unlock()
		}
	}()
}

// has reports whether key got a notification with op, value and version.
func (w *azureWatch) has(key, op, value string, v hlc.HybridLogicalClock) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.got[key] {
		if n.Operation == op && n.Value == value && n.Version.Compare(v) == 0 {
			return true
		}
	}
	return false
}

// hasValue reports whether key got a SET notification of value.
func (w *azureWatch) hasValue(key, value string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.got[key] {
		if n.Operation == "SET" && n.Value == value {
			return true
		}
	}
	return false
}

// waitNotified waits for key's SET notification of value at version v.
func (w *azureWatch) waitNotified(t *testing.T, key, value string, v hlc.HybridLogicalClock) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("notification of %s=%s (%v)", key, value, v), func() bool {
		return w.has(key, "SET", value, v)
	})
}

// azureSet sets key until the store acknowledges it (the group may be
// failing over) and returns the version.
func azureSet(t *testing.T, c *statestore.Client[string, string], key, value string) hlc.HybridLogicalClock {
	t.Helper()
	var v hlc.HybridLogicalClock
	testutil.WaitFor(t, 60*time.Second, "SET "+key+" acknowledged", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := c.Set(ctx, key, value)
		if err != nil || !r.Value {
			return false
		}
		v = r.Version
		return true
	})
	return v
}

// azureKeyNotify registers key until the store accepts it. Each refusal
// must be an answer, not a request left unanswered until its timeout.
func azureKeyNotify(t *testing.T, c *statestore.Client[string, string], key string) (refused int) {
	t.Helper()
	testutil.WaitFor(t, 60*time.Second, "KEYNOTIFY "+key+" accepted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		start := time.Now()
		err := c.KeyNotify(ctx, key)
		if err != nil {
			refused++
			if ctx.Err() != nil {
				t.Fatalf("KEYNOTIFY %s left unanswered for %v: %v", key, time.Since(start).Round(time.Millisecond), err)
			}
		}
		return err == nil
	})
	return refused
}

// TestStateStoreAzureWatchAcrossFailover: watches of a client whose MQTT
// connection to its bridge survives a failover keep firing. The master
// is killed with SIGKILL; a key is watched while the group has no master
// (refused with an answer until it has one, then kept); every key
// changed through the new master is notified to the watcher; a STOP after
// the failover stops the notifications.
func TestStateStoreAzureWatchAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and kills a master")
	}
	c := startFailoverCluster(t)
	// The changes come through a bridge of their own: the watcher's
	// bridge sends the brokers nothing but its watches.
	other := "127.0.0.1:" + strconv.Itoa(testnet.FreePorts(t, 1)[0])
	c.spawn(t, "bridge-2", "bridge", "-registries", c.reg, "-set", "bridge.listen="+other, "-set", "statestore.shards="+strconv.Itoa(testShards))
	m := c.master(t)
	watcher := azureClientAt(t, c.mqtt, "az-watcher")
	setter := azureClientAt(t, other, "az-setter")
	w := newAzureWatch(t)
	var keys []string
	for k := range 2 * testShards { // every shard, most likely
		keys = append(keys, "watched-"+strconv.Itoa(k))
	}
	for _, k := range keys {
		w.follow(watcher, k)
		azureKeyNotify(t, watcher, k)
	}
	for _, k := range keys {
		w.waitNotified(t, k, "before", azureSet(t, setter, k, "before"))
	}

	_ = c.brokers[m].Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	// A watch asked for while the group elects its next master.
	w.follow(watcher, "during")
	refused := azureKeyNotify(t, watcher, "during")
	t.Logf("KEYNOTIFY during the election refused %d times, accepted %v after the kill", refused, time.Since(killed).Round(time.Millisecond))

	for i, k := range keys {
		val := "after-" + strconv.Itoa(i)
		v := azureSet(t, setter, k, val)
		w.waitNotified(t, k, val, v)
	}
	w.waitNotified(t, "during", "x", azureSet(t, setter, "during", "x"))
	t.Logf("every watched key notified through the new master %v after the kill", time.Since(killed).Round(time.Millisecond))

	// The master moved by an election while it stays alive (it becomes
	// a slave): the same.
	c.brokers[m] = c.spawn(t, "broker-"+strconv.Itoa(m), c.bArgs[m]...)
	m = c.master(t)
	ctx := ctx10(t)
	md, err := c.adm.ControllerMetadata(ctx, c.reg)
	if err != nil {
		t.Fatal(err)
	}
	g := md.Groups[0]
	var next int64
	for _, id := range g.SyncStateSet {
		if id != g.MasterID {
			next = id
		}
	}
	if _, err := c.adm.ControllerElect(ctx, []string{c.reg}, g.BrokerName, next, false); err != nil {
		t.Fatalf("elect broker %d: %v", next, err)
	}
	moved := time.Now()
	for i, k := range keys {
		val := "moved-" + strconv.Itoa(i)
		w.waitNotified(t, k, val, azureSet(t, setter, k, val))
	}
	t.Logf("master moved from broker %d to id %d: every watched key notified %v after the election", m, next, time.Since(moved).Round(time.Millisecond))

	// STOP after the failover: answered, and no more notifications. The
	// shard pushes its notifications in the order of its changes, so
	// once the notification of a change made after the stopped key's
	// arrived, one for the stopped key would most likely have too.
	if err := watcher.KeyNotifyStop(ctx, keys[0]); err != nil {
		t.Fatalf("KEYNOTIFY STOP after the failover: %v", err)
	}
	marker := keys[0] + "-marker"
	for k := 0; ssengine.ShardOf([]byte(marker), testShards) != ssengine.ShardOf([]byte(keys[0]), testShards); k++ {
		marker = keys[0] + "-marker-" + strconv.Itoa(k)
	}
	w.follow(watcher, marker)
	azureKeyNotify(t, watcher, marker)
	azureSet(t, setter, keys[0], "stopped")
	w.waitNotified(t, marker, "marker", azureSet(t, setter, marker, "marker"))
	if w.hasValue(keys[0], "stopped") {
		t.Fatalf("%s notified after KEYNOTIFY STOP", keys[0])
	}
}

// idleWatchEnv starts a broker closing connections idle for idle, with a
// change history of history changes per shard (0: the default), and two
// fronts on it: through the first, an Azure client "watcher" watches
// key "k" (w collects its notifications); the second serves setter.
func idleWatchEnv(t *testing.T, idle time.Duration, history int) (*env, *statestore.Client[string, string], *azureWatch) {
	t.Helper()
	e := startEnvBroker(t, false, false, func(o *broker.Options, so *broker.StateStoreOptions) {
		o.Remoting.IdleTimeout = idle
		so.Engine.HistoryLen = history
	})
	_, _, other := e.startFront(t, false)
	setter, w := watchKey(t, e.addr, other, "")
	return e, setter, w
}

// watchKey connects an Azure client named prefix+"watcher" to the MQTT
// server at watcherAddr, which watches key "k" (w collects its
// notifications), and one named prefix+"setter" to setterAddr.
func watchKey(t *testing.T, watcherAddr, setterAddr, prefix string) (*statestore.Client[string, string], *azureWatch) {
	t.Helper()
	watcher := azureClientAt(t, watcherAddr, prefix+"watcher")
	setter := azureClientAt(t, setterAddr, prefix+"setter")
	w := newAzureWatch(t)
	w.follow(watcher, "k")
	azureKeyNotify(t, watcher, "k")
	return setter, w
}

// TestStateStoreAzureWatchSurvivesIdleClose: a broker closes a front end
// connection on which nothing arrived for its idle timeout and drops the
// registrations that came through it. A watcher whose front end sends
// nothing more (the changes come through another front end) must still
// get every change: the front registers its watches again, and what
// changed in between is replayed.
func TestStateStoreAzureWatchSurvivesIdleClose(t *testing.T) {
	const idle = time.Second
	_, setter, w := idleWatchEnv(t, idle, 0)
	// Changes through the other front end, each waited for, for several
	// idle timeouts of the watcher's front end's connection.
	end := time.Now().Add(4 * idle)
	n := 0
	for ; time.Now().Before(end); n++ {
		val := "v" + strconv.Itoa(n)
		w.waitNotified(t, "k", val, azureSet(t, setter, "k", val))
	}
	t.Logf("%d changes notified over %v", n, 4*idle)
}

// TestStateStoreAzureWatchReplaysMissedChanges: changes a shard made
// while it had lost a watch (here dropped on the broker behind the front
// end's back) reach the watcher once the front end registers the watch
// again (after the broker closed its idle connection): each one from the
// shard's change history; or, when the history no longer reaches back,
// the key's latest value.
func TestStateStoreAzureWatchReplaysMissedChanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int
		changes int
	}{
		{"history", 0, 3}, // the default history holds every change
		{"too-old", 2, 6}, // 2 changes kept: the key is read instead
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, setter, w := idleWatchEnv(t, time.Second, tc.history)
			w.waitNotified(t, "k", "v0", azureSet(t, setter, "k", "v0"))
			if n := e.ss.DropClient("watcher"); n != 1 {
				t.Fatalf("dropped %d registrations, want 1", n)
			}
			var last hlc.HybridLogicalClock
			var vals []string
			for i := 1; i <= tc.changes; i++ {
				val := "v" + strconv.Itoa(i)
				vals = append(vals, val)
				last = azureSet(t, setter, "k", val)
			}
			// The watcher's front end learns nothing until the broker
			// closes its connection, idle for a second.
			w.waitNotified(t, "k", vals[len(vals)-1], last)
			for _, v := range vals {
				// From the history every change; without it only the
				// latest value (the first ones are not made up).
				if want := tc.history == 0 || v == vals[len(vals)-1]; w.hasValue("k", v) != want {
					t.Errorf("change to %s notified: %v, want %v", v, !want, want)
				}
			}
			// And the watch is back: a change now is notified at once.
			w.waitNotified(t, "k", "now", azureSet(t, setter, "k", "now"))
		})
	}
}

// TestStateStoreAzureWatchAfterStandaloneRestart: a whole `smartgo
// standalone` killed with SIGKILL and started again forgets its watches
// (they end with the client's connection, docs/protocols.md); the Azure
// client reconnects by itself and watches again, so changes after the
// restart are notified without the application doing anything.
func TestStateStoreAzureWatchAfterStandaloneRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	s := startStandalone(t)
	setter, w := watchKey(t, s.mqtt, s.mqtt, "restart-")
	w.waitNotified(t, "k", "v1", azureSet(t, setter, "k", "v1"))
	s.kill9Restart(t)
	restarted := time.Now()
	// Changes until one is notified: the client watches again once its
	// reconnect is handled, a moment after the setter's may be.
	n := 0
	testutil.WaitFor(t, 60*time.Second, "a change after the restart notified", func() bool {
		n++
		val := "after-" + strconv.Itoa(n)
		v := azureSet(t, setter, "k", val)
		seen := time.Now().Add(2 * time.Second)
		for time.Now().Before(seen) {
			if w.has("k", "SET", val, v) {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	})
	t.Logf("notified again %v after the restart (%d changes)", time.Since(restarted).Round(time.Millisecond), n)
	if v, _ := azureGet(t, setter, "k"); v != "after-"+strconv.Itoa(n) {
		t.Fatalf("k = %q after the restart, want after-%d", v, n)
	}
}

// azureGet reads key until the store answers.
func azureGet(t *testing.T, c *statestore.Client[string, string], key string) (string, hlc.HybridLogicalClock) {
	t.Helper()
	var val string
	var v hlc.HybridLogicalClock
	testutil.WaitFor(t, 30*time.Second, "GET "+key+" answered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := c.Get(ctx, key)
		if err != nil {
			return false
		}
		val, v = r.Value, r.Version
		return true
	})
	return val, v
}

// TestStateStoreAzureWatchChangeAnsweredUnavailable: a master whose
// slaves stopped answering applies a SET but answers it as unavailable
// (not on the sync state set, below min_insync_replicas). The change
// stays: its notification must reach the watcher once the change is on
// the whole set (it used to be lost with the answer, and a retry got the
// cached reply, acknowledged at once, without one).
func TestStateStoreAzureWatchChangeAnsweredUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and stops slaves")
	}
	c := startFailoverCluster(t)
	m := c.master(t)
	setter, w := watchKey(t, c.mqtt, c.mqtt, "held-")
	w.waitNotified(t, "k", "v1", azureSet(t, setter, "k", "v1"))
	var stopped []int
	for j := range c.brokers {
		if j != m {
			// Stopped for sure: a slave still running right after
			// the signal may confirm the SET below.
			testutil.StopProcess(t, c.brokers[j].Process)
			stopped = append(stopped, j)
		}
	}
	cont := func() {
		for _, j := range stopped {
			_ = c.brokers[j].Process.Signal(syscall.SIGCONT)
		}
	}
	defer cont()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := setter.Set(ctx, "k", "unconfirmed"); err == nil {
		t.Fatalf("SET answered %+v with no slave to confirm it", r)
	} else {
		t.Logf("SET with the slaves stopped: %v", err)
	}
	// (Once the master leaves the stopped slaves out of its sync state
	// set, the change is on the whole set, which is the master alone:
	// it may be notified already.)
	cont()
	testutil.WaitFor(t, 60*time.Second, "the change notified once the slaves have it", func() bool {
		return w.hasValue("k", "unconfirmed")
	})
	v, _ := azureGet(t, setter, "k")
	if v != "unconfirmed" {
		t.Fatalf("k = %q, want the change answered as unavailable", v)
	}
}

// TestStateStoreWatchPrefixReplaysMissedChanges: the same for a prefix
// watch (SmartGo's extension, with SmartGo's Go client), which spans
// every shard: each shard's changes made while the watch was lost are
// replayed when the front end registers it there again.
func TestStateStoreWatchPrefixReplaysMissedChanges(t *testing.T) {
	e := startEnvBroker(t, false, false, func(o *broker.Options, _ *broker.StateStoreOptions) { o.Remoting.IdleTimeout = time.Second })
	_, _, other := e.startFront(t, false)
	w := dialAt(t, e.addr, "prefix-watcher")
	c := dialAt(t, other, "prefix-setter")
	ctx := ctx10(t)
	if r, err := w.Do(ctx, ssengine.HLC{}, []byte("KEYNOTIFY"), []byte("p/"), []byte("PREFIX")); err != nil || !r.Version.IsZero() {
		t.Fatalf("KEYNOTIFY PREFIX: %+v %v", r, err)
	}
	got := map[string]ssengine.HLC{}
	next := func(what string) {
		t.Helper()
		select {
		case n := <-w.Notifications():
			got[string(n.Key)+"="+string(n.Value)] = n.Version
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %s (have %v)", what, got)
		}
	}
	if _, _, err := c.Set(ctx, []byte("p/first"), []byte("1"), sscli.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	next("before the loss")
	if n := e.ss.DropClient("prefix-watcher"); n != testShards {
		t.Fatalf("dropped %d registrations, want one per shard (%d)", n, testShards)
	}
	// Keys over every shard, changed while no shard has the watch.
	want := map[string]ssengine.HLC{}
	for k := 0; len(want) < 3*testShards; k++ {
		key := "p/" + strconv.Itoa(k)
		_, v, err := c.Set(ctx, []byte(key), []byte("x"), sscli.SetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[key+"=x"] = v
	}
	for len(got) < len(want)+1 {
		next("replayed after the front end's connection closed")
	}
	for k, v := range want {
		if got[k].Compare(v) != 0 {
			t.Errorf("%s notified at %v, want %v", k, got[k], v)
		}
	}
}
