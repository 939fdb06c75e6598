package shardroute

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// A registry on 127.0.0.1 that answers every route query with two
// queues on broker-a; queries counts them.
func startRegistry(t *testing.T, queries *atomic.Int32) string {
	t.Helper()
	srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterFunc(protocol.GetRouteInfoByTopic, remoting.PoolDefault, func(_ *remoting.Conn, _ *protocol.Command) (*protocol.Command, error) {
		queries.Add(1)
		rd := protocol.TopicRouteData{
			BrokerDatas: []*protocol.BrokerData{{BrokerName: "broker-a", Cluster: "c", BrokerAddrs: map[int64]string{protocol.MasterID: "127.0.0.1:1"}}},
			QueueDatas:  []*protocol.QueueData{{BrokerName: "broker-a", Perm: 6, ReadQueueNums: 2, WriteQueueNums: 2}},
		}
		body, err := protocol.EncodeJSON(rd)
		if err != nil {
			return nil, err
		}
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body = body
		return resp, nil
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Addr().String()
}

// registryTable returns a table of topic T looked up in a registry of
// startRegistry's, refreshed every minute.
func registryTable(t *testing.T, queries *atomic.Int32) *Table {
	t.Helper()
	reg := startRegistry(t, queries)
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	return New(rc, "T", []string{reg}, time.Minute)
}

// CachedAt judges the route's age by the caller's clock reading, not by
// the clock: a reading past the refresh period finds no cached route
// (Get would look it up), one before it does; Cached reads the clock.
// A fixed table is always cached.
func TestTableCachedAt(t *testing.T) {
	var queries atomic.Int32
	tab := registryTable(t, &queries)
	if _, ok := tab.CachedAt(time.Now()); ok {
		t.Fatal("a route cached before any lookup")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now()
	refs, err := tab.Get(ctx, false)
	if err != nil || len(refs) != 2 || refs[1].Addr != "127.0.0.1:1" || refs[1].Queue != 1 {
		t.Fatalf("route %+v %v", refs, err)
	}
	if got, ok := tab.CachedAt(before.Add(time.Second)); !ok || &got[0] != &refs[0] {
		t.Fatalf("route loaded a second before the reading: cached %v", ok)
	}
	if got, ok := tab.Cached(); !ok || &got[0] != &refs[0] {
		t.Fatalf("route just loaded: cached %v", ok)
	}
	if _, ok := tab.CachedAt(time.Now().Add(2 * time.Minute)); ok {
		t.Fatal("a route older than the refresh period as of the reading is cached")
	}
	if n := queries.Load(); n != 1 {
		t.Fatalf("%d route queries, want 1 (CachedAt never looks up)", n)
	}
	fixed := Fixed("T", map[string]string{"b": "127.0.0.1:2"}, 3)
	if got, ok := fixed.CachedAt(time.Now().Add(24 * time.Hour)); !ok || len(got) != 3 {
		t.Fatalf("fixed table: %+v %v", got, ok)
	}
}

// Lookups replace the route while requests read it (run with -race).
func TestTableCachedDuringLookups(t *testing.T) {
	var queries atomic.Int32
	tab := registryTable(t, &queries)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tab.Get(ctx, false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if refs, ok := tab.CachedAt(time.Now()); !ok || len(refs) != 2 {
				t.Errorf("route during lookups: %+v %v", refs, ok)
				return
			}
		}
	}()
	for i := 0; i < 20; i++ {
		if refs, err := tab.Get(ctx, true); err != nil || len(refs) != 2 {
			t.Errorf("forced lookup: %+v %v", refs, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if n := queries.Load(); n < 21 {
		t.Fatalf("%d route queries, want 21", n)
	}
}
