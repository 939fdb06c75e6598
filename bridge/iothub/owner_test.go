package iothub

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// owned lists the client ids the hub notes an owner for.
func owned(h *Hub) []string {
	var ids []string
	h.owners.Range(func(k, _ any) bool {
		ids = append(ids, k.(string))
		return true
	})
	slices.Sort(ids)
	return ids
}

// TestHubOwnersPruned (prune every 20 ms, 5 s grace): the owners noted at CONNECT (owner.go) do not
// outlive the sessions that may still write records: a device whose
// clean session ended is dropped by the hub's own sweep; a device's or an
// anonymous client's persistent session held offline keeps its owner
// (its records still name it) until the session ends. A client with a
// device's id and no user name costs one registry read for a persistent
// session, none for a reconnect within ownerReuse, none for a clean one.
func TestHubOwnersPruned(t *testing.T) {
	c := startTestCluster(t, 1)
	a := startBridgeOf(t, c)
	// The grace outlasts a CONNECT's session load here, also under load.
	a.hub.ownerPrune, a.hub.ownerGrace = 20*time.Millisecond, 5*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.hub.Start(ctx, a.br); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, id := range []string{"clean", "kept", "anon"} {
		keys[id] = createDevice(t, a, id).Authentication.SymmetricKey.PrimaryKey
	}
	dial := func(id string, clean bool) *device {
		t.Helper()
		cp := connectCP(Identity{DeviceID: id}, deviceToken(t, Identity{DeviceID: id}, keys[id], time.Hour))
		cp.CleanStart = clean
		return dialDeviceCP(t, a.addr, Identity{DeviceID: id}, cp)
	}
	anon := func(clean bool) *device {
		t.Helper()
		return dialDeviceCP(t, a.addr, Identity{DeviceID: "anon"}, &packets.Connect{ClientID: "anon", CleanStart: clean, KeepAlive: 60})
	}
	bye := func(d *device) {
		t.Helper()
		d.Send(&packets.Disconnect{})
		d.Closed()
	}
	cl, kept := dial("clean", true), dial("kept", false)
	an := anon(false)
	if got := a.hub.stats.OwnerReads.Load(); got != 1 {
		t.Fatalf("owner reads after an anonymous persistent connect: %d, want 1", got)
	}
	if got := owned(a.hub); !slices.Equal(got, []string{"anon", "clean", "kept"}) {
		t.Fatalf("owners while connected: %v", got)
	}
	bye(an)
	an = anon(false) // within ownerReuse: no read
	if got := a.hub.stats.OwnerReads.Load(); got != 1 {
		t.Fatalf("owner reads after a reconnect: %d, want 1", got)
	}
	bye(an)
	bye(cl)
	bye(kept)
	// The sweep drops the clean session's owner; the sessions held
	// offline keep theirs, whenever the sweep runs.
	waitFor(t, 10*time.Second, "the clean session's owner dropped", func() bool {
		return !slices.Contains(owned(a.hub), "clean")
	})
	a.hub.pruneOwners(time.Now().Add(time.Hour))
	if got := owned(a.hub); !slices.Equal(got, []string{"anon", "kept"}) {
		t.Fatalf("owners with two sessions held offline: %v", got)
	}
	// Clean starts end both sessions (the anonymous one, transient, pays
	// no read and drops its owner at once).
	bye(anon(true))
	if got := a.hub.stats.OwnerReads.Load(); got != 1 {
		t.Fatalf("owner reads after an anonymous clean connect: %d, want 1", got)
	}
	bye(dial("kept", true))
	waitFor(t, 10*time.Second, "every owner dropped", func() bool { return len(owned(a.hub)) == 0 })
}
