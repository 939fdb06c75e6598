package statestore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/broker"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreClusterSlaveReplica routes through the registry (the
// system topic's route) to the master, and checks that the slave, applying
// the replicated queues, reaches byte-identical tables.
func TestStateStoreClusterSlaveReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), Slaves: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	master, err := broker.OpenStateStore(c.Broker(0), broker.StateStoreOptions{Shards: testShards})
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	slave, err := broker.OpenStateStore(c.Slave(0), broker.StateStoreOptions{Shards: testShards})
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	if err := c.WaitRoute(ctx, router.SystemTopic); err != nil {
		t.Fatal(err)
	}

	mo := mqtt.DefaultOptions()
	mo.Listen = []string{"127.0.0.1:0"}
	srv, err := mqtt.NewServer(mo, mqtt.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	front, err := bridge.NewStateStoreFront(srv, bridge.StateStoreFrontOptions{
		Router: router.Options{Registries: c.RegistryAddrs()}})
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	e := &env{addr: srv.Addrs()[0].String()}
	cl := e.dial(t, "cluster-client")
	for i := 0; i < 100; i++ {
		k := []byte(fmt.Sprintf("key-%d", i%23))
		var err error
		switch i % 4 {
		case 3:
			_, err = cl.Del(ctx, k, statestore.HLC{})
		case 2:
			_, _, err = cl.Set(ctx, k, []byte("px"), sscli.SetOptions{Expiry: time.Hour})
		default:
			_, _, err = cl.Set(ctx, k, []byte(fmt.Sprint(i)), sscli.SetOptions{})
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	if v, _, ok, err := cl.Get(ctx, []byte("key-0")); err != nil || !ok || len(v) == 0 {
		t.Fatalf("get: %q %v %v", v, ok, err)
	}
	want := snapshotsOf(t, master)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := slave.Sync(); err != nil {
			t.Fatal(err)
		}
		got := snapshotsOf(t, slave)
		same := true
		for i := range want {
			same = same && bytes.Equal(got[i], want[i])
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("slave tables never matched the master's")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func snapshotsOf(t *testing.T, s *broker.StateStore) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < s.Shards(); i++ {
		var buf bytes.Buffer
		if err := s.Engine(i).Snapshot(&buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}
