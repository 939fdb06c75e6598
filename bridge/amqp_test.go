package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

func newAMQPBackend(t testing.TB, c *cluster.Cluster, timeout time.Duration) *AMQPBackend {
	t.Helper()
	b, err := NewAMQPBackend(AMQPOptions{Registries: c.RegistryAddrs(), RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func openAMQP(t testing.TB, b *AMQPBackend, vhost, name string) amqp.QueueLog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := b.OpenQueue(ctx, vhost, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type appendResult struct {
	first uint64
	err   error
}

// appendWait appends msgs and waits for done.
func appendWait(t testing.TB, l amqp.QueueLog, msgs ...amqp.StoredMessage) appendResult {
	t.Helper()
	ch := make(chan appendResult, 2)
	l.Append(msgs, func(first uint64, err error) { ch <- appendResult{first, err} })
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("append: done not called")
		return appendResult{}
	}
}

func readAll(t testing.TB, l amqp.QueueLog, from uint64) []amqp.StoredMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []amqp.StoredMessage
	for {
		msgs, err := l.Read(ctx, from, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		out = append(out, msgs...)
		from = msgs[len(msgs)-1].Offset + 1
	}
}

func msg(body string) amqp.StoredMessage {
	return amqp.StoredMessage{Exchange: "ex", RoutingKey: "rk." + body, Properties: []byte{0x80, 0x00, 0x0a, 't', 'e', 'x', 't', '/', 'p', 'l', 'a', 'i', 'n'},
		Body: []byte(body)}
}

// A queue's messages and committed offset survive a new backend (a
// restarted process); with two masters the queue's topic lives on one of
// them only, and every backend finds it there.
func TestAMQPBackendAppendReadCommitReopen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), Brokers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := newAMQPBackend(t, c, 0)
	l := openAMQP(t, b, "/", "orders ünïcode")

	empty := amqp.StoredMessage{Exchange: "", RoutingKey: "orders ünïcode"} // no properties, empty body
	if r := appendWait(t, l, empty); r.err != nil || r.first != 0 {
		t.Fatalf("first append: %+v", r)
	}
	if r := appendWait(t, l, msg("a"), msg("b")); r.err != nil || r.first != 1 {
		t.Fatalf("second append: %+v", r)
	}
	got := readAll(t, l, 0)
	want := []amqp.StoredMessage{empty, msg("a"), msg("b")}
	for i := range want {
		want[i].Offset = uint64(i)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read:\n got %+v\nwant %+v", got, want)
	}
	if off, err := l.Committed(ctx); err != nil || off != 0 {
		t.Fatalf("committed of a new queue: %d %v", off, err)
	}
	if err := l.Commit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.Commit(ctx, 1); err != nil { // smaller: ignored
		t.Fatal(err)
	}
	if off, err := l.Committed(ctx); err != nil || off != 2 {
		t.Fatalf("committed: %d %v", off, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := appendWait(t, l, msg("late"))
	if !errors.Is(r.err, ErrClosed) {
		t.Fatalf("append after close: %+v", r)
	}
	b.Close()

	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rd, err := a.TopicRoute(ctx, AMQPQueueTopic("/", "orders ünïcode"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != 1 {
		t.Fatalf("queue topic route: %+v, want one broker with one queue", rd.QueueDatas)
	}

	b2 := newAMQPBackend(t, c, 0)
	l2 := openAMQP(t, b2, "/", "orders ünïcode")
	if off, err := l2.Committed(ctx); err != nil || off != 2 {
		t.Fatalf("committed after reopen: %d %v", off, err)
	}
	if got := readAll(t, l2, 2); len(got) != 1 || got[0].Offset != 2 || string(got[0].Body) != "b" {
		t.Fatalf("read from the committed offset after reopen: %+v", got)
	}
	if r := appendWait(t, l2, msg("c")); r.err != nil || r.first != 3 {
		t.Fatalf("append after reopen: %+v", r)
	}
	// Another vhost's queue of the same name is another log.
	other := openAMQP(t, b2, "tenant", "orders ünïcode")
	if got := readAll(t, other, 0); len(got) != 0 {
		t.Fatalf("other vhost's queue holds %d messages", len(got))
	}
}

func testDefinitions(n int) amqp.Definitions {
	d := amqp.Definitions{
		Exchanges: []amqp.ExchangeDef{{VHost: "/", Name: "logs", Type: "topic", Internal: true, Arguments: []byte{1, 'x', 'S', 0, 0, 0, 1, 'y'}},
			{VHost: "v2", Name: "fan", Type: "fanout", AutoDelete: true}},
		Queues:   []amqp.QueueDef{{VHost: "/", Name: "q1"}, {VHost: "/", Name: fmt.Sprintf("q%d", n), AutoDelete: true, Arguments: []byte{9}}},
		Bindings: []amqp.BindingDef{{VHost: "/", Source: "logs", Destination: "q1", RoutingKey: "#"}, {VHost: "v2", Source: "fan", Destination: "logs", ToExchange: true}},
	}
	return d
}

// The newest saved definitions are what a new backend loads; a first
// start loads empty definitions.
func TestAMQPBackendDefinitionsSurviveANewBackend(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newAMQPBackend(t, c, 0)
	d, err := b.LoadDefinitions(ctx)
	if err != nil || !reflect.DeepEqual(d, amqp.Definitions{}) {
		t.Fatalf("first load: %+v %v", d, err)
	}
	for i := 2; i <= 4; i++ {
		if err := b.SaveDefinitions(ctx, testDefinitions(i)); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if err := b.SaveDefinitions(ctx, testDefinitions(5)); !errors.Is(err, ErrClosed) {
		t.Fatalf("save after close: %v", err)
	}
	b2 := newAMQPBackend(t, c, 0)
	d, err = b2.LoadDefinitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := testDefinitions(4); !reflect.DeepEqual(d, want) {
		t.Fatalf("load:\n got %+v\nwant %+v", d, want)
	}
	// Concurrent saves are serialised: every one is stored whole.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b2.SaveDefinitions(ctx, testDefinitions(10+i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if d, err = b2.LoadDefinitions(ctx); err != nil || len(d.Queues) != 2 || !strings.HasPrefix(d.Queues[1].Name, "q1") {
		t.Fatalf("load after concurrent saves: %+v %v", d, err)
	}
}

// A deleted queue's log and committed offset are gone: the queue
// declared again under its name starts empty at offset 0.
func TestAMQPBackendDeleteQueueStartsEmpty(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newAMQPBackend(t, c, 0)
	l := openAMQP(t, b, "/", "jobs")
	for i := range 3 {
		if r := appendWait(t, l, msg(fmt.Sprint(i))); r.err != nil || r.first != uint64(i) {
			t.Fatalf("append %d: %+v", i, r)
		}
	}
	if err := l.Commit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := b.DeleteQueue(ctx, "/", "jobs"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteQueue(ctx, "/", "jobs"); err != nil { // gone already
		t.Fatalf("second delete: %v", err)
	}
	l = openAMQP(t, b, "/", "jobs")
	if got := readAll(t, l, 0); len(got) != 0 {
		t.Fatalf("the queue declared again holds %+v", got)
	}
	if off, err := l.Committed(ctx); err != nil || off != 0 {
		t.Fatalf("committed after delete: %d %v", off, err)
	}
	if r := appendWait(t, l, msg("new")); r.err != nil || r.first != 0 {
		t.Fatalf("append after delete: %+v", r)
	}
}

// Appends made one after another, from several goroutines and without
// waiting for done, get offsets in the order of the calls, and Read gives
// the messages back in that order.
func TestAMQPBackendConcurrentAppendsKeepCallOrder(t *testing.T) {
	c := startCluster(t)
	b := newAMQPBackend(t, c, 0)
	l := openAMQP(t, b, "/", "ordered")
	const workers, each = 8, 60
	var (
		callMu sync.Mutex
		calls  int
		wg     sync.WaitGroup
		resMu  sync.Mutex
		offs   = map[int]uint64{} // call number -> first offset
		errs   []error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := 1 + (w+i)%3 // 1..3 messages an Append
				callMu.Lock()
				seq := calls
				calls++
				msgs := make([]amqp.StoredMessage, n)
				for k := range msgs {
					msgs[k] = msg(fmt.Sprintf("%d/%d", seq, k))
				}
				wg.Add(1)
				l.Append(msgs, func(first uint64, err error) {
					defer wg.Done()
					resMu.Lock()
					defer resMu.Unlock()
					if err != nil {
						errs = append(errs, err)
					}
					offs[seq] = first
				})
				callMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := readAll(t, l, 0)
	next, at := uint64(0), 0
	for seq := range calls {
		if offs[seq] != next {
			t.Fatalf("append call %d got offset %d, want %d", seq, offs[seq], next)
		}
		for k := 0; at < len(got) && strings.HasPrefix(string(got[at].Body), fmt.Sprintf("%d/", seq)); k++ {
			if want := fmt.Sprintf("%d/%d", seq, k); string(got[at].Body) != want || got[at].Offset != next {
				t.Fatalf("message at %d: %q offset %d, want %q offset %d", at, got[at].Body, got[at].Offset, want, next)
			}
			at++
			next++
		}
	}
	if at != len(got) || len(got) != int(next) {
		t.Fatalf("read %d messages, matched %d of %d", len(got), at, next)
	}
}

// A broker that is down fails every call within a bound (the request
// timeout, with the SDK's own wait for a master), not a hang.
func TestAMQPBackendBrokerDownGivesErrors(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const timeout = 500 * time.Millisecond
	b := newAMQPBackend(t, c, timeout)
	l := openAMQP(t, b, "/", "down")
	if r := appendWait(t, l, msg("up")); r.err != nil {
		t.Fatal(r.err)
	}
	if err := b.SaveDefinitions(ctx, testDefinitions(1)); err != nil {
		t.Fatal(err)
	}
	if err := c.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	bound := 10 * timeout
	within := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		if err == nil {
			t.Errorf("%s with the broker down: no error", what)
		}
		if d := time.Since(start); d > bound {
			t.Errorf("%s took %v, over %v", what, d, bound)
		}
		t.Logf("%s: %v", what, err)
	}
	within("append", func() error { return appendWait(t, l, msg("down")).err })
	within("read", func() error { _, err := l.Read(ctx, 0, 10); return err })
	within("commit", func() error { return l.Commit(ctx, 1) })
	within("save definitions", func() error { return b.SaveDefinitions(ctx, testDefinitions(2)) })
	within("load definitions", func() error { _, err := b.LoadDefinitions(ctx); return err })
	within("open queue", func() error { _, err := b.OpenQueue(ctx, "/", "other"); return err })
	within("close", func() error { return errors.Join(l.Close(), errors.New("closed")) })
}

func TestAMQPQueueTopicNames(t *testing.T) {
	long := strings.Repeat("x", 255)
	names := []struct{ vhost, name string }{
		{"/", "orders"}, {"/", "orders "}, {"/", "orders_"}, {"v", "orders"}, {"/v", "orders"}, {"v_orders", ""},
		{"/", long}, {"/", long[:254] + "y"}, {"/", "ünï/cödé.#*"}, {"/", ""}, {"/", "amq.gen-abc"},
	}
	seen := map[string]int{}
	for i, n := range names {
		topic := AMQPQueueTopic(n.vhost, n.name)
		if err := client.ValidateTopic(topic); err != nil {
			t.Errorf("%q/%q: topic %q: %v", n.vhost, n.name, topic, err)
		}
		if again := AMQPQueueTopic(n.vhost, n.name); again != topic {
			t.Errorf("not deterministic: %q then %q", topic, again)
		}
		if j, dup := seen[topic]; dup {
			t.Errorf("%v and %v share topic %q", names[j], n, topic)
		}
		seen[topic] = i
	}
	if got, want := AMQPQueueTopic("/", "orders"), "AMQP_Q_orders_"; !strings.HasPrefix(got, want) || len(got) != len(want)+16 {
		t.Errorf("topic of /orders: %q", got)
	}
	if got := AMQPQueueTopic("v", "a.b"); !strings.HasPrefix(got, "AMQP_Q_v_a_b_") {
		t.Errorf("topic of v/a.b: %q", got)
	}
}

// The record layout documented in amqp_format.go.
func TestAMQPRecordBytes(t *testing.T) {
	m := amqp.StoredMessage{Exchange: "ex", RoutingKey: "k", Properties: []byte{0x90, 0x00}, Body: []byte("hi")}
	got, err := encodeAMQPRecord(&m)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 2, 'e', 'x', 1, 'k', 0, 0, 0, 2, 0x90, 0x00, 'h', 'i'}
	if !bytes.Equal(got, want) {
		t.Fatalf("record % x, want % x", got, want)
	}
	back, err := decodeAMQPRecord(got)
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Fatalf("decode: %+v %v", back, err)
	}
	if _, err := encodeAMQPRecord(&amqp.StoredMessage{Exchange: strings.Repeat("e", 256)}); !errors.Is(err, ErrBadAMQPRecord) {
		t.Fatalf("long exchange: %v", err)
	}
	for _, bad := range [][]byte{nil, {2}, {1}, {1, 3, 'a'}, {1, 0, 0, 0, 0, 0, 5, 1}} {
		if _, err := decodeAMQPRecord(bad); !errors.Is(err, ErrBadAMQPRecord) {
			t.Errorf("decode % x: %v", bad, err)
		}
	}
}

// The snapshot layout documented in amqp_format.go.
func TestAMQPDefinitionsBytes(t *testing.T) {
	d := amqp.Definitions{
		Exchanges: []amqp.ExchangeDef{{VHost: "/", Name: "e", Type: "direct", AutoDelete: true, Internal: true, Arguments: []byte{7}}},
		Queues:    []amqp.QueueDef{{VHost: "/", Name: "q"}},
		Bindings:  []amqp.BindingDef{{VHost: "/", Source: "e", Destination: "q", RoutingKey: "k"}},
	}
	got := encodeAMQPDefinitions(d)
	payload := []byte{
		0, 0, 0, 1, // exchanges
		0, 0, 0, 1, '/', 0, 0, 0, 1, 'e', 0, 0, 0, 6, 'd', 'i', 'r', 'e', 'c', 't', 3, 0, 0, 0, 1, 7,
		0, 0, 0, 1, // queues
		0, 0, 0, 1, '/', 0, 0, 0, 1, 'q', 0, 0, 0, 0, 0,
		0, 0, 0, 1, // bindings
		0, 0, 0, 1, '/', 0, 0, 0, 1, 'e', 0, 0, 0, 1, 'q', 0, 0, 0, 0, 1, 'k', 0, 0, 0, 0,
	}
	want := append([]byte("AQDF\x01\xac\xa5\x3a\x46"), payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("snapshot\n% x\nwant\n% x", got, want)
	}
	back, err := decodeAMQPDefinitions(got)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("decode: %+v %v", back, err)
	}
	flipped := bytes.Clone(got)
	flipped[len(flipped)-1] ^= 1
	if _, err := decodeAMQPDefinitions(flipped); !errors.Is(err, ErrBadAMQPRecord) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("flipped byte: %v", err)
	}
	if _, err := decodeAMQPDefinitions(got[:len(got)-1]); !errors.Is(err, ErrBadAMQPRecord) {
		t.Fatalf("truncated: %v", err)
	}
}

func FuzzAMQPRecord(f *testing.F) {
	r, _ := encodeAMQPRecord(&amqp.StoredMessage{Exchange: "ex", RoutingKey: "k", Properties: []byte{0x90, 0}, Body: []byte("b")})
	f.Add(r)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeAMQPRecord(b)
		if err != nil {
			return
		}
		again, err := encodeAMQPRecord(&m)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoded % x from % x (%v)", again, b, err)
		}
	})
}

func FuzzAMQPDefinitions(f *testing.F) {
	f.Add(encodeAMQPDefinitions(testDefinitions(3)))
	f.Add(encodeAMQPDefinitions(amqp.Definitions{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeAMQPDefinitions(b)
		if err != nil {
			return
		}
		if again := encodeAMQPDefinitions(d); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded % x from % x", again, b)
		}
	})
}

// The newest definitions snapshot is appended again once it is older than
// the refresh interval (so the brokers' retention never removes it while
// no definition changes), and what is appended is the snapshot the topic
// holds: a newer one another backend saved is kept, not replaced by this
// backend's older one.
func TestAMQPBackendRefreshesTheNewestDefinitions(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const every = 300 * time.Millisecond
	a, err := newAMQPBackendEvery(AMQPOptions{Registries: c.RegistryAddrs()}, every)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.SaveDefinitions(ctx, testDefinitions(1)); err != nil {
		t.Fatal(err)
	}
	other := newAMQPBackend(t, c, 0) // refreshes every 6 h: not in this test
	if err := other.SaveDefinitions(ctx, testDefinitions(2)); err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	broker, err := other.topicBroker(ctx, AMQPDefinitionsTopic)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int64 {
		_, _, minOff, maxOff, err := adm.BrowseMessages(ctx, AMQPDefinitionsTopic, broker, 0, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		return maxOff - minOff
	}
	deadline := time.Now().Add(20 * time.Second)
	for count() < 4 { // two saves, then two refreshes at least
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshots after %v: not refreshed", count(), 20*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d, err := newAMQPBackend(t, c, 0).LoadDefinitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := testDefinitions(2); !reflect.DeepEqual(d, want) {
		t.Fatalf("after refreshes:\n got %+v\nwant %+v (the newest save)", d, want)
	}
}

// A definitions snapshot that does not decode (another writer's message,
// a newer format) is passed over: the load returns the snapshot before
// it. The load used to fail, and with it the start of the AMQP server.
func TestAMQPBackendPassesOverABadSnapshot(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := &testutil.LogBuffer{}
	b, err := NewAMQPBackend(AMQPOptions{Registries: c.RegistryAddrs(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SaveDefinitions(ctx, testDefinitions(3)); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, c)
	for _, body := range []string{"not a snapshot", "\x00\x00\x00\x00\x07"} {
		if _, err := p.Send(ctx, &client.Message{Topic: AMQPDefinitionsTopic, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := b.LoadDefinitions(ctx)
	if err != nil {
		t.Fatalf("load with the two newest snapshots bad: %v", err)
	}
	if want := testDefinitions(3); !reflect.DeepEqual(d, want) {
		t.Fatalf("load:\n got %+v\nwant %+v", d, want)
	}
	if n := strings.Count(logs.String(), "AMQP definitions snapshot cannot be read"); n != 2 {
		t.Errorf("%d bad snapshots logged, want 2:\n%s", n, logs.String())
	}
}

// A backend that never loaded or saved a snapshot (its AMQP server had no
// definitions) leaves the definitions topic alone: it asks the brokers
// nothing, so a node not using AMQP costs them no requests.
func TestAMQPBackendWithoutDefinitionsRefreshesNothing(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	idle, err := newAMQPBackendEvery(AMQPOptions{Registries: c.RegistryAddrs()}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	saver := newAMQPBackend(t, c, 0) // refreshes every 6 h
	if err := saver.SaveDefinitions(ctx, testDefinitions(1)); err != nil {
		t.Fatal(err)
	}
	broker, err := saver.topicBroker(ctx, AMQPDefinitionsTopic)
	if err != nil {
		t.Fatal(err)
	}
	// Over 20 of idle's intervals: a refresh would have copied the
	// snapshot (older than 50 ms) many times.
	time.Sleep(time.Second)
	_, _, minOff, maxOff, err := idle.adm.BrowseMessages(ctx, AMQPDefinitionsTopic, broker, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := maxOff - minOff; n != 1 {
		t.Fatalf("%d snapshots: the idle backend refreshed", n)
	}
}
