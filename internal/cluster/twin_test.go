package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	twc "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/twin"
)

// twinCluster is an in-process cluster whose brokers (and slaves) host
// twin shards.
type twinCluster struct {
	*Cluster
	t      *testing.T
	mu     sync.Mutex
	twins  []*broker.Twins // per broker; nil while stopped
	slaveT []*broker.Twins
	opts   broker.TwinOptions
}

func startTwinCluster(t *testing.T, brokers int, slaves bool) *twinCluster {
	t.Helper()
	c, err := Start(context.Background(), Options{Dir: t.TempDir(), Brokers: brokers, Slaves: slaves})
	if err != nil {
		t.Fatal(err)
	}
	tc := &twinCluster{Cluster: c, t: t, opts: broker.TwinOptions{Shards: 4, SnapshotInterval: time.Hour}}
	for i := 0; i < brokers; i++ {
		tc.twins = append(tc.twins, tc.open(c.Broker(i)))
		if slaves {
			tc.slaveT = append(tc.slaveT, tc.open(c.Slave(i)))
		}
	}
	t.Cleanup(func() {
		tc.mu.Lock()
		for _, tw := range append(tc.twins, tc.slaveT...) {
			if tw != nil {
				_ = tw.Close()
			}
		}
		tc.mu.Unlock()
		_ = c.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitRoute(ctx, twc.SystemTopic); err != nil {
		t.Fatal(err)
	}
	return tc
}

func (tc *twinCluster) open(b *broker.Broker) *broker.Twins {
	tc.t.Helper()
	tw, err := broker.OpenTwins(b, tc.opts)
	if err != nil {
		tc.t.Fatal(err)
	}
	return tw
}

// restartBroker closes broker i's twins and the broker, and starts both
// again on the same data.
func (tc *twinCluster) restartBroker(i int) {
	tc.t.Helper()
	tc.mu.Lock()
	tw := tc.twins[i]
	tc.twins[i] = nil
	tc.mu.Unlock()
	if err := tw.Close(); err != nil {
		tc.t.Fatal(err)
	}
	if err := tc.StopBroker(i); err != nil {
		tc.t.Fatal(err)
	}
	if err := tc.StartBroker(i); err != nil {
		tc.t.Fatal(err)
	}
	tw = tc.open(tc.Broker(i))
	tc.mu.Lock()
	tc.twins[i] = tw
	tc.mu.Unlock()
}

func (tc *twinCluster) client(mod func(*twc.Options)) *twc.Client {
	tc.t.Helper()
	o := twc.Options{Registries: tc.RegistryAddrs(), WatchCheck: 100 * time.Millisecond, RouteRefresh: 200 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	c, err := twc.New(o)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustTwErr(t *testing.T, err error, want error, text string) {
	t.Helper()
	var e *twc.Error
	if !errors.Is(err, want) || !errors.As(err, &e) || !strings.Contains(e.Msg, text) {
		t.Fatalf("got %v, want %v with %q", err, want, text)
	}
}

// TestClusterTwinAPI drives the client API against two brokers (eight
// shards): identity CRUD, twin writes with their conditions, the device
// side, bad input, queries paged across shards and counted, and desired
// changes reaching a watching client.
func TestClusterTwinAPI(t *testing.T) {
	tc := startTwinCluster(t, 2, false)
	var mu sync.Mutex
	var got []twc.DesiredChange
	front := tc.client(func(o *twc.Options) {
		o.OnDesired = func(list []twc.DesiredChange) {
			mu.Lock()
			got = append(got, list...)
			mu.Unlock()
		}
	})
	back := tc.client(nil)
	ctx := context.Background()
	if n, err := back.Shards(ctx); err != nil || n != 8 {
		t.Fatalf("shards %d %v", n, err)
	}
	const n = 60
	for i := 0; i < n; i++ {
		d, err := back.CreateDevice(ctx, &twc.Device{DeviceID: fmt.Sprintf("dev-%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Authentication == nil || d.Authentication.SymmetricKey == nil || d.Authentication.SymmetricKey.PrimaryKey == "" || d.Etag == "" {
			t.Fatalf("created device without keys or etag: %+v", d)
		}
		region := []string{"us", "eu", "apac"}[i%3]
		if _, err := back.UpdateTwin(ctx, d.DeviceID, "", []byte(`{"tags":{"region":"`+region+`","n":`+fmt.Sprint(i)+`}}`), "*"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := back.CreateDevice(ctx, &twc.Device{DeviceID: "dev-00"}); !errors.Is(err, twc.ErrExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if _, err := back.CreateModule(ctx, &twc.Module{DeviceID: "dev-01", ModuleID: "sensor"}); err != nil {
		t.Fatal(err)
	}
	if mods, err := back.ListModules(ctx, "dev-01"); err != nil || len(mods) != 1 || mods[0].ModuleID != "sensor" {
		t.Fatalf("modules %+v %v", mods, err)
	}

	// Listing devices pages across the shards and sees each once.
	seen := map[string]bool{}
	tok := ""
	for pages := 0; ; pages++ {
		devs, next, err := back.ListDevices(ctx, 7, tok)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devs {
			if seen[d.DeviceID] {
				t.Fatalf("%s listed twice", d.DeviceID)
			}
			seen[d.DeviceID] = true
		}
		if tok = next; tok == "" {
			break
		}
		if pages > 50 {
			t.Fatal("listing does not end")
		}
	}
	if len(seen) != n {
		t.Fatalf("listed %d devices, want %d", len(seen), n)
	}

	// The device side, as a bridge acts for a device.
	if err := front.SetConnected(ctx, "dev-07", "", "node1-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := front.Watch(ctx, "dev-07", ""); err != nil {
		t.Fatal(err)
	}
	if tw, err := back.UpdateDesired(ctx, "dev-07", "", []byte(`{"interval":30}`), 1); err != nil || tw.Version != 3 {
		t.Fatalf("update desired: %v", err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 {
			return fmt.Errorf("%d desired changes", len(got))
		}
		return nil
	})
	if g := got[0]; g.DeviceID != "dev-07" || g.Version != 2 || string(g.Patch) != `{"interval":30,"$version":2}` {
		t.Fatalf("desired change %+v %s", g, g.Patch)
	}
	if _, err := back.UpdateDesired(ctx, "dev-07", "", []byte(`{"interval":60}`), 1); !errors.Is(err, twc.ErrPrecondition) {
		t.Fatalf("stale desired version: %v", err)
	}
	if _, err := back.UpdateTwin(ctx, "dev-07", "", []byte(`{"tags":{"x":1}}`), `"AAAAAAAAAAE="`); !errors.Is(err, twc.ErrPrecondition) {
		t.Fatalf("stale etag: %v", err)
	}
	ver, err := front.PatchReported(ctx, "dev-07", "", []byte(`{"interval":30,"fw":"2.1"}`), 0)
	if err != nil || ver != 2 {
		t.Fatalf("reported: %d %v", ver, err)
	}
	props, err := front.GetProperties(ctx, "dev-07", "")
	if err != nil || string(props.JSON) != `{"desired":{"interval":30,"$version":2},"reported":{"fw":"2.1","interval":30,"$version":2}}` {
		t.Fatalf("properties %s %v", props.JSON, err)
	}
	tw, err := back.GetTwin(ctx, "dev-07", "")
	if err != nil || tw.Version != 4 || !bytes.Contains(tw.JSON, []byte(`"connectionState":"Connected"`)) {
		t.Fatalf("twin %s %v", tw.JSON, err)
	}
	// Bad input: clear errors, nothing changed.
	_, err = front.PatchReported(ctx, "dev-07", "", []byte(`{"a":`), 0)
	mustTwErr(t, err, twc.ErrInvalid, "malformed JSON")
	_, err = front.PatchReported(ctx, "dev-07", "", []byte(`{"a.b":1}`), 0)
	mustTwErr(t, err, twc.ErrInvalid, "key rules")
	_, err = front.PatchReported(ctx, "dev-07", "", []byte(`{"s":"`+strings.Repeat("x", 4097)+`"}`), 0)
	mustTwErr(t, err, twc.ErrInvalid, "string length")
	big := `{"a":"` + strings.Repeat("x", 4000) + `"`
	for i := 0; i < 8; i++ {
		big += fmt.Sprintf(`,"k%d":"%s"`, i, strings.Repeat("y", 4000))
	}
	_, err = front.PatchReported(ctx, "dev-07", "", []byte(big+"}"), 0)
	mustTwErr(t, err, twc.ErrTooLarge, "properties.reported size")
	_, err = back.GetTwin(ctx, "nobody", "")
	mustTwErr(t, err, twc.ErrNotFound, "not found")
	if after, _ := back.GetTwin(ctx, "dev-07", ""); after.Version != 4 {
		t.Fatalf("a refused write moved the twin to version %d", after.Version)
	}
	if err := front.SetDisconnected(ctx, "dev-07", "", "old-conn"); !errors.Is(err, twc.ErrPrecondition) {
		t.Fatalf("superseded disconnect: %v", err)
	}
	if err := front.SetDisconnected(ctx, "dev-07", "", "node1-1"); err != nil {
		t.Fatal(err)
	}

	// Queries: a listing paged across shards, a projection, counts.
	var ids []string
	q := "SELECT deviceId, tags.n FROM devices WHERE tags.region = 'eu'"
	tok = ""
	for {
		page, err := back.Query(ctx, q, twc.QueryOptions{PageSize: 4, Continuation: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			var row struct {
				DeviceID string `json:"deviceId"`
				N        int    `json:"n"`
			}
			if err := json.Unmarshal(it, &row); err != nil || row.N%3 != 1 {
				t.Fatalf("row %s: %v", it, err)
			}
			ids = append(ids, row.DeviceID)
		}
		if tok = page.Continuation; tok == "" {
			break
		}
	}
	if len(ids) != n/3 {
		t.Fatalf("query returned %d devices, want %d", len(ids), n/3)
	}
	page, err := back.Query(ctx, "SELECT tags.region AS region, COUNT() AS n FROM devices GROUP BY tags.region", twc.QueryOptions{})
	if err != nil || !page.Aggregate || len(page.Items) != 3 {
		t.Fatalf("group by: %+v %v", page, err)
	}
	if s := fmt.Sprintf("%s", page.Items); s != `[{"region":"apac","n":20} {"region":"eu","n":20} {"region":"us","n":20}]` {
		t.Fatalf("groups %s", s)
	}
	page, err = back.Query(ctx, "SELECT * FROM devices.modules", twc.QueryOptions{})
	if err != nil || len(page.Items) != 1 || !bytes.Contains(page.Items[0], []byte(`"moduleId":"sensor"`)) {
		t.Fatalf("modules query: %+v %v", page, err)
	}
	if _, err := back.Query(ctx, "SELECT * FROM devices WHERE", twc.QueryOptions{}); !errors.Is(err, twc.ErrInvalid) {
		t.Fatalf("bad query: %v", err)
	}
	if _, err := back.Query(ctx, q, twc.QueryOptions{Continuation: "garbage"}); !errors.Is(err, twc.ErrBadContinuation) {
		t.Fatalf("bad continuation: %v", err)
	}

	// Deleting the device deletes its module.
	if err := back.DeleteDevice(ctx, "dev-01", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := back.GetModule(ctx, "dev-01", "sensor"); !errors.Is(err, twc.ErrNotFound) {
		t.Fatalf("module after its device's delete: %v", err)
	}
}

// TestClusterTwinEventsConsumer: every twin change and connection change
// reaches a plain SDK push consumer of the events topic, with opType,
// deviceId, version and etag, in order per device (an orderly consumer:
// events of a device share a queue, in log order).
func TestClusterTwinEventsConsumer(t *testing.T) {
	tc := startTwinCluster(t, 1, false)
	back := tc.client(nil)
	ctx := context.Background()
	var mu sync.Mutex
	var events []string
	co := client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: tc.RegistryAddrs()}, Group: "twin-watchers", From: client.ConsumeFromFirst, Orderly: true}
	pc, err := client.NewPushConsumer(co, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			events = append(events, fmt.Sprintf("%s %s v=%s %s tag=%s %s", m.Property("opType"), m.Property("deviceId"),
				m.Property("version"), m.Property("etag"), m.Tags, m.Body))
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(broker.DefaultTwinEventsTopic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()

	if _, err := back.CreateDevice(ctx, &twc.Device{DeviceID: "ev1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := back.UpdateTwin(ctx, "ev1", "", []byte(`{"properties":{"desired":{"a":1}}}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := back.ReplaceTwin(ctx, "ev1", "", []byte(`{"tags":{"t":true}}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := back.PatchReported(ctx, "ev1", "", []byte(`{"r":"x"}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := back.SetConnected(ctx, "ev1", "", "c1", ""); err != nil {
		t.Fatal(err)
	}
	if err := back.SetDisconnected(ctx, "ev1", "", "c1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(events) < 6 {
			return fmt.Errorf("%d events", len(events))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		`createDeviceIdentity ev1 v=1 AAAAAAAAAAE= tag=createDeviceIdentity {"deviceId":"ev1"`,
		`updateTwin ev1 v=2 AAAAAAAAAAI= tag=updateTwin {"version":2,"properties":{"desired":{"a":1,"$version":2}}}`,
		`replaceTwin ev1 v=3 AAAAAAAAAAM= tag=replaceTwin {"version":3,"tags":{"t":true},"properties":{"desired":{"$version":3}}}`,
		`updateTwin ev1 v=4 AAAAAAAAAAQ= tag=updateTwin {"version":4,"properties":{"reported":{"r":"x","$version":2}}}`,
		`deviceConnected ev1 v=4 AAAAAAAAAAQ= tag=deviceConnected {"deviceId":"ev1","connectionState":"Connected"`,
		`deviceDisconnected ev1 v=4 AAAAAAAAAAQ= tag=deviceDisconnected {"deviceId":"ev1","connectionState":"Disconnected"`,
	}
	if len(events) != len(want) {
		t.Fatalf("events:\n%s", strings.Join(events, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(events[i], want[i]) {
			t.Fatalf("event %d:\n got %s\nwant %s...", i, events[i], want[i])
		}
	}
}

// TestClusterTwinSlaveAndWatchRecovery: a slave applies the replicated
// twin log to the same state as its master; a client's watches survive a
// restart of the broker (a new epoch): it registers them again and gets
// the next desired change.
func TestClusterTwinSlaveAndWatchRecovery(t *testing.T) {
	tc := startTwinCluster(t, 1, true)
	var mu sync.Mutex
	var got []string
	front := tc.client(func(o *twc.Options) {
		o.OnDesired = func(list []twc.DesiredChange) {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range list {
				got = append(got, d.DeviceID+" "+string(d.Patch))
			}
		}
	})
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("s%02d", i)
		if _, err := front.CreateDevice(ctx, &twc.Device{DeviceID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := front.PatchReported(ctx, id, "", []byte(`{"i":`+fmt.Sprint(i)+`}`), 0); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if err := tc.slaveT[0].Sync(); err != nil {
			return err
		}
		for i := 0; i < tc.twins[0].Shards(); i++ {
			var a, b bytes.Buffer
			if err := tc.twins[0].Engine(i).Snapshot(&a); err != nil {
				return err
			}
			if err := tc.slaveT[0].Engine(i).Snapshot(&b); err != nil {
				return err
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				return fmt.Errorf("shard %d differs on the slave", i)
			}
		}
		return nil
	})
	// The slave refuses writes (not the owner).
	if _, err := tc.slaveT[0].Do(ctx, 0, &twc.Request{Op: twin.OpPatchReported, DeviceID: "s00", Body: []byte("{}")}); !errors.Is(err, broker.ErrTwinNotOwner) {
		t.Fatalf("slave write: %v", err)
	}

	if err := front.Watch(ctx, "s05", ""); err != nil {
		t.Fatal(err)
	}
	epoch := tc.twins[0].Epoch()
	tc.restartBroker(0)
	if tc.twins[0].Epoch() == epoch {
		t.Fatal("the epoch did not change across a restart")
	}
	// The watch is registered again by the client's loop.
	testutil.Eventually(t, 10*time.Second, func() error {
		if tc.twins[0].Watching() != 1 {
			return errors.New("watch not registered again")
		}
		return nil
	})
	if _, err := front.UpdateDesired(ctx, "s05", "", []byte(`{"k":"v"}`), 0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || got[0] != `s05 {"k":"v","$version":2}` {
			return fmt.Errorf("got %v", got)
		}
		return nil
	})
	// After the restart the twins are all there.
	if tw, err := front.GetTwin(ctx, "s39", ""); err != nil || !bytes.Contains(tw.JSON, []byte(`"i":39`)) {
		t.Fatalf("after restart: %v", err)
	}
}

// TestClusterTwinRaces: many goroutines race on twin etags and reported
// versions through the real broker and the client: every etag is won
// once, a lost race is ErrPrecondition and changes nothing, and the
// final versions count the writes that won.
func TestClusterTwinRaces(t *testing.T) {
	tc := startTwinCluster(t, 1, false)
	c := tc.client(nil)
	ctx := context.Background()
	if _, err := c.CreateDevice(ctx, &twc.Device{DeviceID: "race"}); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 15
	var mu sync.Mutex
	won := map[string]bool{}
	reportedWins := 0
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				cur, err := c.GetTwin(ctx, "race", "")
				if err != nil {
					errs <- err
					return
				}
				_, err = c.UpdateTwin(ctx, "race", "", []byte(fmt.Sprintf(`{"tags":{"w%d":%d}}`, w, r)), cur.Etag)
				switch {
				case err == nil:
					mu.Lock()
					if won[cur.Etag] {
						errs <- fmt.Errorf("etag %s won twice", cur.Etag)
					}
					won[cur.Etag] = true
					mu.Unlock()
				case !errors.Is(err, twc.ErrPrecondition):
					errs <- err
					return
				}
				props, err := c.GetProperties(ctx, "race", "")
				if err != nil {
					errs <- err
					return
				}
				var p struct {
					Reported struct {
						Version int64 `json:"$version"`
					} `json:"reported"`
				}
				_ = json.Unmarshal(props.JSON, &p)
				if _, err := c.PatchReported(ctx, "race", "", []byte(fmt.Sprintf(`{"w%d":%d}`, w, r)), p.Reported.Version); err == nil {
					mu.Lock()
					reportedWins++
					mu.Unlock()
				} else if !errors.Is(err, twc.ErrPrecondition) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tw, err := c.GetTwin(ctx, "race", "")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version    int64 `json:"version"`
		Properties struct {
			Reported struct {
				Version int64 `json:"$version"`
			} `json:"reported"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(tw.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != int64(1+len(won)+reportedWins) || doc.Properties.Reported.Version != int64(1+reportedWins) {
		t.Fatalf("version %d, reported %d after %d tag wins and %d reported wins", doc.Version, doc.Properties.Reported.Version, len(won), reportedWins)
	}
	if len(won) == 0 || reportedWins == 0 {
		t.Fatal("no writer ever won")
	}
}

// TestClusterTwinControlledFailover: in controller mode every broker of
// the group hosts the twin shards; when the master stops, the elected
// slave serves every acknowledged twin write, and produces the events of
// an entry the old master stored but did not get to emit (a crash between
// the entry and its events, simulated by storing an entry alone).
func TestClusterTwinControlledFailover(t *testing.T) {
	c := startControlled(t, CtlOptions{Sync: true})
	twins := make([]*broker.Twins, 3)
	for j := range twins {
		tw, err := broker.OpenTwins(c.Broker(j), broker.TwinOptions{Shards: 4, SnapshotInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		twins[j] = tw
		t.Cleanup(func() { _ = tw.Close() })
	}
	cl, err := twc.New(twc.Options{Registries: c.RegistryAddrs(), RouteRefresh: 200 * time.Millisecond, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	ctx := context.Background()
	testutil.Eventually(t, 20*time.Second, func() error {
		_, err := cl.CreateDevice(ctx, &twc.Device{DeviceID: "f00"})
		return err
	})
	waitSyncSet(t, c, 3)
	// A master that cannot reach the controller for a moment (a loaded
	// machine) refuses writes as unavailable, changing nothing: retry as a
	// back end would.
	retry := func(op func() error) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := op()
			if err == nil {
				return
			}
			if !errors.Is(err, twc.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	acked := map[string]int64{}
	for i := 1; i < 30; i++ {
		id := fmt.Sprintf("f%02d", i)
		retry(func() error {
			_, err := cl.CreateDevice(ctx, &twc.Device{DeviceID: id})
			if errors.Is(err, twc.ErrExists) {
				err = nil // an earlier attempt reported unavailable was applied after all
			}
			return err
		})
		retry(func() error {
			ver, err := cl.PatchReported(ctx, id, "", []byte(`{"n":`+fmt.Sprint(i)+`}`), 0)
			acked[id] = ver
			return err
		})
	}
	old, _ := c.Master()
	// The old master's last act: an entry stored without its events.
	spare, _ := twin.New(twin.Options{}, nil)
	entry, _, _ := spare.Prepare(&twin.Request{Op: twin.OpPutDevice, DeviceID: "orphan"})
	shard := int32(twin.ShardOf("orphan", 4))
	host := c.Broker(old).Store().Options().StoreHost
	if _, err := c.Broker(old).Store().Put(ctx, &record.Message{Topic: broker.TwinTopic, QueueID: shard, Body: entry, BornHost: host}); err != nil {
		t.Fatal(err)
	}
	ob := c.Broker(old)
	testutil.Eventually(t, 10*time.Second, func() error { // on the sync state set before the master goes
		for j := range twins {
			if j != old && c.Broker(j).Store().MaxPhysicalOffset() < ob.Store().MaxPhysicalOffset() {
				return fmt.Errorf("broker %d behind", j)
			}
		}
		return nil
	})
	_ = twins[old].Close()
	if err := c.StopBroker(old); err != nil {
		t.Fatal(err)
	}
	nm, err := c.WaitMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		_, err := cl.GetDevice(ctx, "orphan")
		return err
	})
	for id, ver := range acked {
		props, err := cl.GetProperties(ctx, id, "")
		if err != nil {
			t.Fatalf("%s after the failover: %v", id, err)
		}
		if !bytes.Contains(props.JSON, []byte(fmt.Sprintf(`"$version":%d}}`, ver))) {
			t.Fatalf("%s: %s, acknowledged reported $version %d", id, props.JSON, ver)
		}
	}
	retry(func() error { _, err := cl.PatchReported(ctx, "f01", "", []byte(`{"after":true}`), 0); return err })
	// The orphan's event was produced once by the new master.
	nb := c.Broker(nm)
	orphanEvents := 0
	testutil.Eventually(t, 10*time.Second, func() error {
		orphanEvents = 0
		st := nb.Store()
		for off := st.MinOffset(broker.DefaultTwinEventsTopic, shard); off < st.MaxOffset(broker.DefaultTwinEventsTopic, shard); off++ {
			r, err := st.GetMessages(broker.DefaultTwinEventsTopic, shard, off, 1, nil)
			if err != nil || len(r.Buffers) == 0 {
				return fmt.Errorf("read event %d: %v", off, err)
			}
			m, _, err := record.Decode(r.Buffers[0], false)
			r.Release()
			if err != nil {
				return err
			}
			if dev, _ := record.LookupPropertyString(m.Properties, "deviceId"); dev == "orphan" {
				orphanEvents++
			}
		}
		if orphanEvents == 0 {
			return errors.New("no event for the orphan entry")
		}
		return nil
	})
	if orphanEvents != 1 {
		t.Fatalf("%d events for the orphan entry", orphanEvents)
	}
}
