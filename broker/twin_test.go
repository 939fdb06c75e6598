package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/twin"
)

func twOpen(t testing.TB, b *Broker, mod func(*TwinOptions)) *Twins {
	t.Helper()
	o := TwinOptions{Shards: 4, SnapshotInterval: time.Hour}
	if mod != nil {
		mod(&o)
	}
	tw, err := OpenTwins(b, o)
	if err != nil {
		t.Fatalf("open twins: %v", err)
	}
	return tw
}

// twDo runs one request on its device's shard in process.
func twDo(t testing.TB, tw *Twins, r twin.Request) twin.Reply {
	t.Helper()
	rep, err := tw.Do(context.Background(), int32(twin.ShardOf(r.DeviceID, tw.Shards())), &r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Op, r.DeviceID, err)
	}
	return rep
}

func twSnapshots(t testing.TB, tw *Twins) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < tw.Shards(); i++ {
		var buf bytes.Buffer
		if err := tw.Engine(i).Snapshot(&buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}

// twEvents reads every event of the events topic, in queue then offset
// order, as "opType device v=version off=twinOffset" lines.
func twEvents(t *testing.T, b *Broker, topic string, shards int) []string {
	t.Helper()
	st := b.Store()
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return st.DispatchedPhysicalOffset() >= st.MaxPhysicalOffset() })
	var out []string
	for q := int32(0); q < int32(shards); q++ {
		for off := b.Store().MinOffset(topic, q); off < b.Store().MaxOffset(topic, q); off++ {
			res, err := b.Store().GetMessages(topic, q, off, 1, nil)
			if err != nil || len(res.Buffers) == 0 {
				t.Fatalf("read event %d/%d: %v", q, off, err)
			}
			m, _, err := record.Decode(res.Buffers[0], true)
			res.Release()
			if err != nil {
				t.Fatal(err)
			}
			p := func(k string) string { v, _ := record.LookupPropertyString(m.Properties, k); return v }
			out = append(out, p("opType")+" "+p("deviceId")+" v="+p("version")+" off="+p(propTwinOffset)+" tag="+p(record.PropertyTags))
		}
	}
	return out
}

// Over the broker's remoting port: identity and twin operations, a watch
// receiving a desired change pushed on another connection, the events
// topic filling, and malformed requests answered with clear codes.
func TestTwinHostRemoting(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	tw := twOpen(t, b, nil)
	defer tw.Close()
	rc, err := remoting.NewClient(remoting.ClientOptions{SerializeType: protocol.SerializeRocketMQ})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var mu sync.Mutex
	var pushed []twin.DesiredChange
	watcher, err := remoting.NewClient(remoting.ClientOptions{SerializeType: protocol.SerializeRocketMQ})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	watcher.RegisterFunc(protocol.TwinNotify, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		list, err := twin.DecodeDesiredChanges(req.Body)
		if err != nil {
			t.Errorf("push: %v", err)
		}
		mu.Lock()
		pushed = append(pushed, list...)
		mu.Unlock()
		return nil, nil
	})
	ctx := context.Background()
	invoke := func(r twin.Request) twin.Reply {
		t.Helper()
		return twinCall(t, tw.Shards(), r, func(req *protocol.Command) *protocol.Command {
			resp, err := rc.Invoke(ctx, b.Addr(), req)
			if err != nil || resp.Code != protocol.Success {
				t.Fatalf("%s: %v %+v", r.Op, err, resp)
			}
			return resp
		})
	}
	if rep := invoke(twin.Request{Op: twin.OpPutDevice, DeviceID: "dev1", Mode: twin.PutCreate}); rep.Status != 200 {
		t.Fatalf("create: %+v", rep)
	}
	resp, err := watcher.Invoke(ctx, b.Addr(), protocol.NewRequest(protocol.TwinWatch, nil, twin.AppendWatch(nil, twin.WatchAdd, []string{"dev1"})))
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("watch: %v %+v", err, resp)
	}
	if epoch, err := twin.DecodeWatchReply(resp.Body); err != nil || epoch != tw.Epoch() {
		t.Fatalf("watch epoch %d %v, want %d", epoch, err, tw.Epoch())
	}
	rep := invoke(twin.Request{Op: twin.OpUpdateTwin, DeviceID: "dev1", IfMatch: `"AAAAAAAAAAE="`,
		Body: []byte(`{"properties":{"desired":{"fan":"on"}},"tags":{"site":"a"}}`)})
	if rep.Status != 200 || rep.Etag != "AAAAAAAAAAI=" {
		t.Fatalf("update: %+v", rep)
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool { mu.Lock(); defer mu.Unlock(); return len(pushed) == 1 })
	if p := pushed[0]; p.DeviceID != "dev1" || p.Version != 2 || string(p.Patch) != `{"fan":"on","$version":2}` {
		t.Fatalf("pushed %+v %s", p, p.Patch)
	}
	if rep := invoke(twin.Request{Op: twin.OpPatchReported, DeviceID: "dev1", Body: []byte(`{"fan":"on"}`)}); rep.Status != 204 || rep.Version != 2 {
		t.Fatalf("reported: %+v", rep)
	}
	if rep := invoke(twin.Request{Op: twin.OpGetProperties, DeviceID: "dev1"}); string(rep.Body) != `{"desired":{"fan":"on","$version":2},"reported":{"fan":"on","$version":2}}` {
		t.Fatalf("properties: %s", rep.Body)
	}
	if rep := invoke(twin.Request{Op: twin.OpUpdateTwin, DeviceID: "dev1", IfMatch: `"AAAAAAAAAAE="`, Body: []byte(`{"tags":{"site":"b"}}`)}); rep.Status != 412 || rep.Err == nil {
		t.Fatalf("stale etag: %+v", rep)
	}
	if rep := invoke(twin.Request{Op: twin.OpPatchReported, DeviceID: "dev1", Body: []byte(`{"a":`)}); rep.Status != 400 || !strings.Contains(rep.Err.Msg, "malformed JSON") {
		t.Fatalf("bad JSON: %+v", rep)
	}
	// Malformed bodies and headers: SystemError with the reason.
	bad := protocol.NewTwinRequest(0, []byte{9, 9})
	if resp, err := rc.Invoke(ctx, b.Addr(), bad); err != nil || resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "bad twin request") {
		t.Fatalf("bad body: %v %+v", err, resp)
	}
	if resp, err := rc.Invoke(ctx, b.Addr(), protocol.NewTwinRequest(99, (&twin.Request{Op: twin.OpGetTwin, DeviceID: "x"}).AppendBinary(nil))); err != nil || resp.Code != protocol.ServiceNotAvailable {
		t.Fatalf("foreign shard: %v %+v", err, resp)
	}
	// Closing the watching connection drops its watches.
	watcher.CloseConn(b.Addr())
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return tw.Watching() == 0 })

	got := strings.Join(twEvents(t, b, DefaultTwinEventsTopic, tw.Shards()), "\n")
	want := strings.Join([]string{
		"createDeviceIdentity dev1 v=1 off=0 tag=createDeviceIdentity",
		"updateTwin dev1 v=2 off=1 tag=updateTwin",
		"updateTwin dev1 v=3 off=2 tag=updateTwin",
	}, "\n")
	if got != want {
		t.Fatalf("events:\n%s\nwant\n%s", got, want)
	}
}

// A restart restores every shard from its snapshot and the log after it
// to the same state; a crash that lost the events of the last entries
// (stored, not yet produced) produces them at the restart, once.
func TestTwinHostRestartAndLostEvents(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	tw := twOpen(t, b, nil)
	ids := []string{"a", "b", "c", "d", "e", "f"}
	for _, id := range ids {
		twDo(t, tw, twin.Request{Op: twin.OpPutDevice, DeviceID: id})
		twDo(t, tw, twin.Request{Op: twin.OpUpdateTwin, DeviceID: id, Body: []byte(`{"tags":{"k":1}}`)})
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return tw.Snapshot() == nil && snapshotsWritten(dir) == tw.Shards() })
	for _, id := range ids {
		twDo(t, tw, twin.Request{Op: twin.OpPatchReported, DeviceID: id, Body: []byte(`{"r":true}`)})
	}
	before := twSnapshots(t, tw)
	eventsBefore := twEvents(t, b, DefaultTwinEventsTopic, tw.Shards())

	// A crash after an entry was stored but before its events: put the
	// entry of a new device straight into its shard's queue.
	tw.stop()
	spare, _ := twin.New(twin.Options{}, nil)
	entry, _, _ := spare.Prepare(&twin.Request{Op: twin.OpPutDevice, DeviceID: "late"})
	lateShard := int32(twin.ShardOf("late", tw.Shards()))
	lateOff := b.Store().MaxOffset(TwinTopic, lateShard)
	if _, err := b.Store().Put(context.Background(), &record.Message{Topic: TwinTopic, QueueID: lateShard, Body: entry,
		BornHost: b.storeHost, StoreHost: b.storeHost}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return b.Store().MaxOffset(TwinTopic, lateShard) == lateOff+1 })
	_ = b.Close()

	b = testBroker(t, dir, nil)
	tw = twOpen(t, b, nil)
	defer tw.Close()
	if doc, ok := tw.Engine(int(lateShard)).Get("late", ""); !ok || !bytes.Contains(doc, []byte(`"deviceId":"late"`)) {
		t.Fatal("the entry stored before the crash was not replayed")
	}
	after := twSnapshots(t, tw)
	for i := range before {
		if i != int(lateShard) && !bytes.Equal(before[i], after[i]) {
			t.Fatalf("shard %d differs after the restart", i)
		}
	}
	eventsAfter := twEvents(t, b, DefaultTwinEventsTopic, tw.Shards())
	if len(eventsAfter) != len(eventsBefore)+1 {
		t.Fatalf("%d events before, %d after: want exactly the lost one more\n%s", len(eventsBefore), len(eventsAfter), strings.Join(eventsAfter, "\n"))
	}
	found := false
	for _, e := range eventsAfter {
		if strings.HasPrefix(e, "createDeviceIdentity late v=1 off=") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the lost event was not produced:\n%s", strings.Join(eventsAfter, "\n"))
	}
	// A second restart produces nothing again.
	tw.stop()
	_ = b.Close()
	b = testBroker(t, dir, nil)
	tw2 := twOpen(t, b, nil)
	defer tw2.Close()
	if n := len(twEvents(t, b, DefaultTwinEventsTopic, tw2.Shards())); n != len(eventsAfter) {
		t.Fatalf("a clean restart produced events again: %d, want %d", n, len(eventsAfter))
	}
}

func snapshotsWritten(dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "twin", "shard-*.snap"))
	return len(files)
}

// Writes from many goroutines racing on one twin's etag and reported
// $version: exactly one writer wins each etag, versions only grow, and
// the twin ends with every accepted write.
func TestTwinHostConcurrentConditions(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	tw := twOpen(t, b, nil)
	defer tw.Close()
	twDo(t, tw, twin.Request{Op: twin.OpPutDevice, DeviceID: "hot"})
	const writers, rounds = 8, 25
	var mu sync.Mutex
	wins := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				get := twDo(t, tw, twin.Request{Op: twin.OpGetTwin, DeviceID: "hot"})
				rep := twDo(t, tw, twin.Request{Op: twin.OpUpdateTwin, DeviceID: "hot", IfMatch: get.Etag,
					Body: []byte(`{"tags":{"w` + itoa(w) + `":` + itoa(r) + `}}`)})
				switch {
				case rep.Status == 200:
					mu.Lock()
					wins[get.Etag]++
					mu.Unlock()
				case errors.Is(rep.Err, twin.ErrPrecondition):
				default:
					t.Errorf("update: %+v", rep)
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for etag, n := range wins {
		if n != 1 {
			t.Fatalf("etag %s won %d times", etag, n)
		}
		total++
	}
	get := twDo(t, tw, twin.Request{Op: twin.OpGetTwin, DeviceID: "hot"})
	var doc struct {
		Version int64          `json:"version"`
		Tags    map[string]int `json:"tags"`
	}
	if err := json.Unmarshal(get.Body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != int64(total)+1 {
		t.Fatalf("version %d after %d accepted writes", doc.Version, total)
	}
}

// twinCall sends r to its shard (of shards) through call, which returns
// the broker's successful answer, and decodes the reply.
func twinCall(t *testing.T, shards int, r twin.Request, call func(*protocol.Command) *protocol.Command) twin.Reply {
	t.Helper()
	resp := call(protocol.NewTwinRequest(int32(twin.ShardOf(r.DeviceID, shards)), r.AppendBinary(nil)))
	rep, err := twin.DecodeReply(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return *rep
}
