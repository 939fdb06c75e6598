package broker

import (
	"context"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/twin"
)

// The state store and the twins push notifications to the front end (a
// bridge's connection) that watches for a client. A front end that stopped
// reading, its write queue full of answers to held pulls, must not hold up
// the request whose change notifies it: the notice waits in that
// connection's queue until the connection is cut off, and the request
// that caused it is answered at once.

// stalledNotifyRequester is a remoting client for the healthy front end.
func stalledNotifyRequester(t *testing.T) *remoting.Client {
	t.Helper()
	rc, err := remoting.NewClient(remoting.ClientOptions{SerializeType: protocol.SerializeRocketMQ})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// invokeWithin invokes req on addr and fails unless it is answered with
// Success within 5 s (a notice waiting for the stalled connection would
// hold it until WriteTimeout, 30 s).
func invokeWithin(t *testing.T, rc *remoting.Client, addr string, req *protocol.Command, what string) *protocol.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := rc.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatalf("%s: not answered in %v: %v", what, time.Since(start), err)
	}
	if resp.Code != protocol.Success {
		t.Fatalf("%s: %d %s", what, resp.Code, resp.Remark)
	}
	return resp
}

func TestStateStoreStalledFrontEndHoldsUpNoRequest(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Remoting.MaxWriteQueue = 64 << 10 })
	s := ssOpen(t, b, nil)
	defer s.Close()
	prod := newTestClient(t, b.Addr())
	prod.mustSend("S", 0, "first", "")

	const key = "stalled-watch"
	shard := int32(statestore.ShardOf([]byte(key), s.Shards()))
	watch := &protocol.StateStoreRequest{Shard: shard, ClientID: "watcher", Timestamp: ssTS(), HasTimestamp: true,
		Payload: statestore.AppendRequest(nil, []byte("KEYNOTIFY"), []byte(key))}
	stallPeer(t, b, prod, protocol.NewStateStoreRequest(watch), "ssg", func() {
		testutil.WaitFor(t, 5*time.Second, "the watcher's front end known", func() bool {
			s.connMu.Lock()
			defer s.connMu.Unlock()
			_, ok := s.conns["watcher"]
			return ok
		})
	})

	rc := stalledNotifyRequester(t)
	for i := range 3 {
		set := &protocol.StateStoreRequest{Shard: shard, ClientID: "writer", Timestamp: ssTS(), HasTimestamp: true,
			Payload: statestore.AppendRequest(nil, []byte("SET"), []byte(key), []byte{'a' + byte(i)})}
		resp := invokeWithin(t, rc, b.Addr(), protocol.NewStateStoreRequest(set), "SET of the watched key")
		out, err := protocol.DecodeStateStoreResponse(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Reply) != "+OK\r\n" {
			t.Fatalf("SET %d: %q", i, out.Reply)
		}
	}
}

func TestTwinStalledWatcherHoldsUpNoUpdate(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Remoting.MaxWriteQueue = 64 << 10 })
	tw := twOpen(t, b, nil)
	defer tw.Close()
	prod := newTestClient(t, b.Addr())
	prod.mustSend("S", 0, "first", "")
	rc := stalledNotifyRequester(t)
	invoke := func(r twin.Request) twin.Reply {
		t.Helper()
		return twinCall(t, tw.Shards(), r, func(req *protocol.Command) *protocol.Command {
			return invokeWithin(t, rc, b.Addr(), req, r.Op.String())
		})
	}
	if rep := invoke(twin.Request{Op: twin.OpPutDevice, DeviceID: "dev1", Mode: twin.PutCreate}); rep.Status != 200 {
		t.Fatalf("create: %+v", rep)
	}

	hello := protocol.NewRequest(protocol.TwinWatch, nil, twin.AppendWatch(nil, twin.WatchAdd, []string{"dev1"}))
	stallPeer(t, b, prod, hello, "twg", func() {
		testutil.WaitFor(t, 5*time.Second, "the stalled watch registered", func() bool {
			tw.watchMu.Lock()
			defer tw.watchMu.Unlock()
			return len(tw.watchers["dev1"]) == 1
		})
	})

	for i := range 3 {
		body := []byte(`{"properties":{"desired":{"n":` + string(rune('0'+i)) + `}}}`)
		if rep := invoke(twin.Request{Op: twin.OpUpdateTwin, DeviceID: "dev1", Body: body}); rep.Status != 200 {
			t.Fatalf("desired update %d: %+v", i, rep)
		}
	}
}
