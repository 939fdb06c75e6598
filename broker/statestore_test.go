package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

func ssOpen(t testing.TB, b *Broker, mod func(*StateStoreOptions)) *StateStore {
	t.Helper()
	o := StateStoreOptions{Shards: 4, SnapshotInterval: time.Hour}
	if mod != nil {
		mod(&o)
	}
	s, err := OpenStateStore(b, o)
	if err != nil {
		t.Fatalf("open state store: %v", err)
	}
	return s
}

func ssTS() string {
	return statestore.HLC{Wall: time.Now().UnixMilli(), Node: "client"}.String()
}

// ssInvokeLocal runs the command args through s.InvokeLocal as the
// front end of client with sink, the shard picked from the key as the
// front end picks it, and returns the response.
func ssInvokeLocal(t testing.TB, s *StateStore, sink protocol.StateStoreSink, client string, args ...string) *protocol.StateStoreResponse {
	t.Helper()
	bs := make([][]byte, len(args))
	for i, x := range args {
		bs[i] = []byte(x)
	}
	req := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(bs[1], s.Shards())), ClientID: client,
		Timestamp: ssTS(), HasTimestamp: true, Payload: statestore.AppendRequest(nil, bs...)}
	cmd, err := statestore.ParseCommand(req.Payload) // as the front end does, to pick the shard
	if err != nil {
		t.Fatal(err)
	}
	resp := new(protocol.StateStoreResponse)
	if err := s.InvokeLocal(context.Background(), req, &cmd, sink, resp); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return resp
}

// ssDo runs one command on the shard of args[1] and decodes the reply.
func ssDo(t testing.TB, s *StateStore, client string, args ...string) (statestore.Value, string) {
	t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	req := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(bs[1], s.Shards())), ClientID: client,
		Timestamp: ssTS(), HasTimestamp: true, Payload: statestore.AppendRequest(nil, bs...)}
	resp, err := s.Do(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	v, err := statestore.DecodeReply(resp.Reply)
	if err != nil {
		t.Fatalf("%v: reply %q: %v", args, resp.Reply, err)
	}
	return v, resp.Version
}

func ssSnapshots(t testing.TB, s *StateStore) [][]byte {
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

// TestStateStoreExpiryLoopWokenOnlyForExpiries: a SET without an expiry
// does not wake the expiry loop (it used to run a round over every shard
// per SET), and a SET whose expiry comes before the loop's next look
// still wakes it, so the key expires on time rather than at the loop's
// longest sleep.
func TestStateStoreExpiryLoopWokenOnlyForExpiries(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	idle := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for s.expiryAt.Load() == math.MaxInt64 {
			if time.Now().After(deadline) {
				t.Fatal("expiry loop never went to sleep")
			}
			time.Sleep(time.Millisecond)
		}
	}
	idle()
	rounds, start := s.expiryRounds.Load(), time.Now()
	for i := range 50 {
		ssDo(t, s, "c", "SET", fmt.Sprintf("k%d", i), "v")
	}
	// The loop's own timer may fire meanwhile (at most once a second).
	if got, most := s.expiryRounds.Load()-rounds, int64(time.Since(start)/defaultStateStoreMaxDelay)+1; got > most {
		t.Fatalf("50 SETs without expiry ran the expiry loop %d times (its timer allows %d)", got, most)
	}
	idle()
	at := time.UnixMilli(s.expiryAt.Load()) // the sleeping loop's own next look
	ssDo(t, s, "c", "SET", "e", "x", "PX", "1")
	for s.Engine(statestore.ShardOf([]byte("e"), 4)).Stats().Expiring != 0 {
		if time.Now().After(at) {
			t.Fatalf("a key expiring in 1 ms was not expired before the loop's own next look (%v)", at)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStateStoreHostBasicAndNotifications(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	if v, _ := ssDo(t, s, "w", "KEYNOTIFY", "k1"); string(v.Str) != "OK" {
		t.Fatalf("keynotify: %+v", v)
	}
	bs := [][]byte{[]byte("SET"), []byte("k1"), []byte("v1")}
	req := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(bs[1], 4)), ClientID: "c", Timestamp: ssTS(),
		HasTimestamp: true, Payload: statestore.AppendRequest(nil, bs...)}
	resp, err := s.Do(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Reply) != "+OK\r\n" || resp.Version == "" {
		t.Fatalf("set: %q %q", resp.Reply, resp.Version)
	}
	if len(resp.Notifications) != 1 || resp.Notifications[0].ClientID != "w" || string(resp.Notifications[0].Key) != "k1" ||
		resp.Notifications[0].Op != 1 || resp.Notifications[0].Version != resp.Version {
		t.Fatalf("notifications: %+v", resp.Notifications)
	}
	v, ver := ssDo(t, s, "c", "GET", "k1")
	if string(v.Str) != "v1" || ver != resp.Version {
		t.Fatalf("get: %+v %s", v, ver)
	}
	// Expiry by the timer, logged and applied.
	ssDo(t, s, "c", "SET", "e1", "x", "PX", "50")
	deadline := time.Now().Add(5 * time.Second)
	for {
		sh := statestore.ShardOf([]byte("e1"), 4)
		if s.Engine(sh).Stats().Expiring == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("key never expired by the timer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The consume queue is built by the store's dispatcher, after the put
	// returned: wait for it.
	for q := int32(statestore.ShardOf([]byte("e1"), 4)); ; time.Sleep(5 * time.Millisecond) {
		got := b.Store().MaxOffset(StateStoreTopic, q)
		if got >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expire entry not logged: max offset %d", got)
		}
	}
	if n := s.DropClient("w"); n != 1 {
		t.Fatalf("drop client removed %d", n)
	}
}

// TestStateStoreKeyNotifyAnswersShardClock: a registration's answer
// carries the shard's clock as its version (the front end keeps it, to
// register the watch again on another master with SINCE): at least the
// newest version of the shard, so a change made after it is newer. A
// STOP carries none.
func TestStateStoreKeyNotifyAnswersShardClock(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	// On a shard that has no history yet: the beginning of it, which
	// SINCE takes (the zero HLC would mean no SINCE).
	_, first := ssDo(t, s, "w0", "KEYNOTIFY", "k")
	if v, err := statestore.ParseHLC(first); err != nil || v.IsZero() {
		t.Fatalf("registration on an empty shard: version %q (%v)", first, err)
	}
	_, set := ssDo(t, s, "c", "SET", "k", "v1")
	v, clock := ssDo(t, s, "w", "KEYNOTIFY", "k")
	if string(v.Str) != "OK" {
		t.Fatalf("keynotify: %+v", v)
	}
	sv, _ := statestore.ParseHLC(set)
	cv, err := statestore.ParseHLC(clock)
	if err != nil || cv.Compare(sv) < 0 {
		t.Fatalf("registration version %q (%v), want at least the SET's %q", clock, err, set)
	}
	_, next := ssDo(t, s, "c", "SET", "k", "v2")
	if nv, _ := statestore.ParseHLC(next); nv.Compare(cv) <= 0 {
		t.Fatalf("a change after the registration has version %q, not after its clock %q", next, clock)
	}
	// Resumed from the clock: nothing before, the change after.
	bs := [][]byte{[]byte("KEYNOTIFY"), []byte("k"), []byte("SINCE"), []byte(clock)}
	resp, err := s.Do(context.Background(), &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(bs[1], s.Shards())),
		ClientID: "w2", Payload: statestore.AppendRequest(nil, bs...)}, nil)
	if err != nil || len(resp.Notifications) != 1 || string(resp.Notifications[0].Value) != "v2" {
		t.Fatalf("since the clock: %+v %v", resp, err)
	}
	bs[3] = []byte(first)
	resp, err = s.Do(context.Background(), &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(bs[1], s.Shards())),
		ClientID: "w3", Payload: statestore.AppendRequest(nil, bs...)}, nil)
	if err != nil || len(resp.Notifications) != 2 || string(resp.Notifications[0].Value) != "v1" {
		t.Fatalf("since the empty shard's clock: %+v %v", resp, err)
	}
	if v, ver := ssDo(t, s, "w", "KEYNOTIFY", "k", "STOP"); string(v.Str) != "OK" || ver != "" {
		t.Fatalf("stop: %+v version %q", v, ver)
	}
}

// TestStateStoreHostSnapshotPlusReplayEqualsFullReplay restarts one data
// directory twice: once from snapshot + the log after it, once from the
// whole log (snapshots removed); both must equal the live state.
func TestStateStoreHostSnapshotPlusReplayEqualsFullReplay(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, func(o *Options) { o.Store.FlushMode = store.FlushSync })
	s := ssOpen(t, b, nil)
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("key-%d", i%37)
		switch i % 5 {
		case 0, 1:
			ssDo(t, s, "c", "SET", k, fmt.Sprint(i))
		case 2:
			ssDo(t, s, "c", "SET", k, "nx", "NX", "PX", "100000")
		case 3:
			ssDo(t, s, "c", "DEL", k)
		case 4:
			ssDo(t, s, "c", "VDEL", k, fmt.Sprint(i-4))
		}
		if i == 100 {
			if err := s.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	live := ssSnapshots(t, s)
	s.stop() // no final snapshot: the one at i=100 stays
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "statestore", "*.snap"))
	if len(files) == 0 {
		t.Fatal("no snapshot written")
	}

	check := func(name string) {
		b := testBroker(t, dir, func(o *Options) { o.Store.FlushMode = store.FlushSync })
		s := ssOpen(t, b, nil)
		got := ssSnapshots(t, s)
		for i := range live {
			if !bytes.Equal(got[i], live[i]) {
				t.Errorf("%s: shard %d state differs from the live one", name, i)
			}
		}
		s.stop()
		_ = b.Close()
	}
	check("snapshot+replay")
	for _, f := range files {
		_ = os.Remove(f)
	}
	check("full replay")
}

func TestStateStoreSnapshotFilePinned(t *testing.T) {
	for _, magic := range []string{ssSnapMagic, twinSnapMagic} {
		got := hex.EncodeToString(encodeShardSnapshot(magic, 2, 7, []byte{0xAB}))
		want := hex.EncodeToString([]byte(magic)) + "00000001" + "00000002" + "0000000000000007" + "ab"
		if !strings.HasPrefix(got, want) || len(got) != len(want)+8 {
			t.Fatalf("snapshot file\n got %s\nwant %s+crc", got, want)
		}
		if _, _, err := decodeShardSnapshot(encodeShardSnapshot(magic, 2, 7, nil), magic, 3); err == nil {
			t.Fatal("wrong shard accepted")
		}
		if _, _, err := decodeShardSnapshot(encodeShardSnapshot(magic, 2, 7, nil), "SGXSHARD", 2); err == nil {
			t.Fatal("wrong magic accepted")
		}
		bad := encodeShardSnapshot(magic, 2, 7, []byte{1})
		bad[len(bad)-5] ^= 1
		if _, _, err := decodeShardSnapshot(bad, magic, 2); err == nil {
			t.Fatal("bad checksum accepted")
		}
	}
	// The CRC of the example, computed outside Go: CRC32-C of the header and 0xab.
	if got := hex.EncodeToString(encodeShardSnapshot(ssSnapMagic, 2, 7, []byte{0xAB})); !strings.HasSuffix(got, "ab3313f51e") {
		t.Fatalf("snapshot file CRC: %s", got)
	}
}

// TestStateStoreHostKill9 runs a broker with sync flush in a child process
// under a SET load, kills it with SIGKILL, restarts on the same directory
// and checks that every acknowledged SET is there with its version.
func TestStateStoreHostKill9(t *testing.T) {
	if dir := os.Getenv("SMARTGO_SS_CHILD_DIR"); dir != "" {
		ssChild(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateStoreHostKill9$", "-test.v")
	cmd.Env = append(os.Environ(), "SMARTGO_SS_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string][2]string{} // key -> value, version
	sc := bufio.NewScanner(out)
	n := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "ACK" {
			continue
		}
		acked[f[1]] = [2]string{f[2], f[3]}
		if n++; n == 1500 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	_ = cmd.Wait()
	if n < 1500 {
		t.Fatalf("child acknowledged only %d SETs", n)
	}
	b := testBroker(t, dir, func(o *Options) { o.Store.FlushMode = store.FlushSync })
	s := ssOpen(t, b, nil)
	defer s.stop()
	for k, vv := range acked {
		sh := statestore.ShardOf([]byte(k), s.Shards())
		val, ver, ok := s.Engine(sh).Get([]byte(k), time.Now())
		if !ok {
			t.Fatalf("acknowledged key %s lost", k)
		}
		// A later, unacknowledged SET of the same key may have landed.
		ackVer, err := statestore.ParseHLC(vv[1])
		if err != nil {
			t.Fatalf("acked version %q: %v", vv[1], err)
		}
		if ver.Compare(ackVer) < 0 {
			t.Fatalf("key %s: version %s older than acknowledged %s (value %s, acked %s)", k, ver, vv[1], val, vv[0])
		}
		if ver.Compare(ackVer) == 0 && string(val) != vv[0] {
			t.Fatalf("key %s: value %s at acknowledged version, want %s", k, val, vv[0])
		}
	}
	t.Logf("%d keys checked after SIGKILL", len(acked))
}

func ssChild(t *testing.T, dir string) {
	b := testBroker(t, dir, func(o *Options) { o.Store.FlushMode = store.FlushSync })
	s := ssOpen(t, b, func(o *StateStoreOptions) { o.SnapshotInterval = 30 * time.Millisecond })
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := "k" + strconv.Itoa(g) + "-" + strconv.Itoa(i%50)
				val := strconv.Itoa(i)
				_, ver := ssDo(t, s, "c", "SET", k, val)
				mu.Lock()
				fmt.Fprintf(w, "ACK %s %s %s\n", k, val, ver)
				_ = w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestStateStoreHostFailStop writes a foreign record into one shard's
// queue: the shard stops (at the next append, and at replay after a
// restart) while the other shards keep serving.
func TestStateStoreHostFailStop(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	s := ssOpen(t, b, nil)
	key := "victim"
	shard := int32(statestore.ShardOf([]byte(key), s.Shards()))
	other := "other"
	for statestore.ShardOf([]byte(other), s.Shards()) == int(shard) {
		other += "x"
	}
	ssDo(t, s, "c", "SET", key, "v")
	if _, err := b.Store().Put(context.Background(), &record.Message{Topic: StateStoreTopic, QueueID: shard, Body: []byte("garbage"),
		BornHost: b.storeHost, StoreHost: b.storeHost}); err != nil {
		t.Fatal(err)
	}
	req := &protocol.StateStoreRequest{Shard: shard, ClientID: "c", Timestamp: ssTS(), HasTimestamp: true,
		Payload: statestore.AppendRequest(nil, []byte("SET"), []byte(key), []byte("w"))}
	if _, err := s.Do(context.Background(), req, nil); !errors.Is(err, ErrStateStoreFailed) {
		t.Fatalf("append after a foreign record: %v", err)
	}
	if _, err := s.Do(context.Background(), req, nil); !errors.Is(err, ErrStateStoreFailed) {
		t.Fatalf("stopped shard served: %v", err)
	}
	get := &protocol.StateStoreRequest{Shard: shard, ClientID: "c", Payload: statestore.AppendRequest(nil, []byte("GET"), []byte(key))}
	if _, err := s.Do(context.Background(), get, nil); !errors.Is(err, ErrStateStoreFailed) {
		t.Fatalf("stopped shard served a GET: %v", err)
	}
	ssDo(t, s, "c", "SET", other, "ok")
	s.stop()
	_ = b.Close()

	b = testBroker(t, dir, nil)
	s = ssOpen(t, b, nil)
	defer s.stop()
	if err := s.Err(); err == nil || !errors.Is(err, statestore.ErrCorrupt) {
		t.Fatalf("replay of a corrupt entry: %v", err)
	}
	if v, _ := ssDo(t, s, "c", "GET", other); string(v.Str) != "ok" {
		t.Fatalf("healthy shard after restart: %+v", v)
	}
	if _, err := s.Do(context.Background(), req, nil); !errors.Is(err, ErrStateStoreFailed) {
		t.Fatalf("corrupt shard served after restart: %v", err)
	}
	if _, err := s.Do(context.Background(), get, nil); !errors.Is(err, ErrStateStoreFailed) {
		t.Fatalf("corrupt shard served a GET after restart: %v", err)
	}
}

// ssSink is a protocol.StateStoreSink that collects what is pushed to it.
type ssSink struct {
	mu  sync.Mutex
	got []protocol.StateStoreNotification
}

func (s *ssSink) PushStateStoreNotifications(ns []protocol.StateStoreNotification) {
	s.mu.Lock()
	s.got = append(s.got, ns...)
	s.mu.Unlock()
}

func (s *ssSink) take() []protocol.StateStoreNotification {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

// TestStateStoreHostLocalSinks drives InvokeLocal from two in-process
// front ends: a watcher's notifications are pushed to its sink whichever
// front end (or the expiry timer) caused them, the watcher's own too, and
// stop after DropClient.
func TestStateStoreHostLocalSinks(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	a, other := &ssSink{}, &ssSink{}
	invoke := func(sink protocol.StateStoreSink, client string, args ...string) *protocol.StateStoreResponse {
		t.Helper()
		return ssInvokeLocal(t, s, sink, client, args...)
	}
	if r := invoke(a, "w", "KEYNOTIFY", "k"); string(r.Reply) != "+OK\r\n" {
		t.Fatalf("keynotify: %q", r.Reply)
	}
	// Through the watcher's front end: pushed to its sink before the
	// call returned (in the shard's order with the others' pushes), none
	// in the response.
	r := invoke(a, "c1", "SET", "k", "v1")
	if len(r.Notifications) != 0 {
		t.Fatalf("own front end got the notification in the response: %+v", r.Notifications)
	}
	if got := a.take(); len(got) != 1 || got[0].ClientID != "w" || string(got[0].Value) != "v1" || got[0].Version != r.Version {
		t.Fatalf("own front end: pushed %+v (version %s)", got, r.Version)
	}
	// Through another front end: pushed to the watcher's sink.
	r = invoke(other, "c2", "SET", "k", "v2")
	if len(r.Notifications) != 0 {
		t.Fatalf("other front end got the watcher's notification: %+v", r.Notifications)
	}
	if got := a.take(); len(got) != 1 || got[0].ClientID != "w" || string(got[0].Value) != "v2" || got[0].Version != r.Version {
		t.Fatalf("pushed: %+v (version %s)", got, r.Version)
	}
	// A GET changes nothing and notifies nobody.
	if r := invoke(other, "c2", "GET", "k"); string(r.Reply) != "$2\r\nv2\r\n" || len(r.Notifications) != 0 {
		t.Fatalf("get: %q %+v", r.Reply, r.Notifications)
	}
	// Expiry, by the broker's timer: pushed.
	invoke(a, "w", "KEYNOTIFY", "e")
	invoke(other, "c2", "SET", "e", "x", "PX", "30")
	// The SET's push comes first and the expiry's after it; on a busy
	// machine the expiry may already be in the sink with it (30 ms is
	// short), so both are collected, never drained unseen.
	var got []protocol.StateStoreNotification
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 2 {
		got = append(got, a.take()...)
		if len(got) > 2 || (len(got) > 0 && (got[0].Op != uint8(statestore.OpSet) || string(got[0].Key) != "e")) {
			t.Fatalf("set then expiry pushed %+v", got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("expiry notification never pushed to the sink: %+v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got[1].Op != uint8(statestore.OpDelete) || string(got[1].Key) != "e" {
		t.Fatalf("expiry pushed %+v", got[1])
	}
	if n := s.DropClient("w"); n != 2 { // k and e (a registration outlives its key)
		t.Fatalf("drop client removed %d registrations", n)
	}
	invoke(other, "c2", "SET", "k", "v3")
	if got := a.take(); len(got) != 0 {
		t.Fatalf("pushed after DropClient: %+v", got)
	}
}

// BenchmarkStateStoreGetPath serves GETs of 100-byte values from 50
// concurrent callers through the two ways a front end reaches the
// broker's state store: remote, a StateStoreInvoke over loopback remoting
// (the baseline: a bridge in its own process), and local, InvokeLocal in
// process (`smartgo standalone`). Every reply is checked.
func BenchmarkStateStoreGetPath(b *testing.B) {
	br, s := ssBenchOpen(b, 8<<20)
	const keys = 1000
	val := bytes.Repeat([]byte{'x'}, 100)
	want := append(append([]byte("$100\r\n"), val...), "\r\n"...)
	reqs := make([]*protocol.StateStoreRequest, keys)
	for i := range reqs {
		k := []byte("key:" + strconv.Itoa(i))
		set := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(k, 8)), ClientID: "c", Timestamp: ssTS(), HasTimestamp: true,
			Payload: statestore.AppendRequest(nil, []byte("SET"), k, val)}
		if _, err := s.Do(context.Background(), set, nil); err != nil {
			b.Fatal(err)
		}
		reqs[i] = &protocol.StateStoreRequest{Shard: set.Shard, ClientID: "c", Payload: statestore.AppendRequest(nil, []byte("GET"), k)}
	}
	rc, err := remoting.NewClient(remoting.ClientOptions{SerializeType: protocol.SerializeRocketMQ})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	paths := []struct {
		name string
		get  func(*protocol.StateStoreRequest) ([]byte, error)
	}{
		{"remote", func(r *protocol.StateStoreRequest) ([]byte, error) {
			resp, err := rc.Invoke(context.Background(), br.Addr(), protocol.NewStateStoreRequest(r))
			if err != nil {
				return nil, err
			}
			if resp.Code != protocol.Success {
				return nil, fmt.Errorf("code %d %s", resp.Code, resp.Remark)
			}
			out, err := protocol.DecodeStateStoreResponse(resp.Body)
			if err != nil {
				return nil, err
			}
			return out.Reply, nil
		}},
		{"local", func(r *protocol.StateStoreRequest) ([]byte, error) {
			cmd, err := statestore.ParseCommand(r.Payload) // the front end's one parse
			if err != nil {
				return nil, err
			}
			var out protocol.StateStoreResponse
			if err := s.InvokeLocal(context.Background(), r, &cmd, nil, &out); err != nil {
				return nil, err
			}
			return out.Reply, nil
		}},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(len(val)))
			b.ReportAllocs()
			b.SetParallelism(25) // 50 callers on 2 CPUs
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					reply, err := p.get(reqs[next.Add(1)%keys])
					if err != nil {
						b.Error(err)
						return
					}
					if !bytes.Equal(reply, want) {
						b.Errorf("reply %q", reply)
						return
					}
				}
			})
		})
	}
}

// TestStateStoreWaits: under async flush no request waits; under sync
// flush the mutations that reach the log wait for the group commit and
// the rest (reads, KEYNOTIFY, a payload that did not parse) do not. The
// answer follows what Do does: a sync-flush SET served through Do is
// stored durably before it is answered.
func TestStateStoreWaits(t *testing.T) {
	cmds := map[string]*statestore.Command{"nil": nil}
	for _, args := range [][]string{{"SET", "k", "v"}, {"GET", "k"}, {"DEL", "k"}, {"VDEL", "k", "v"}, {"KEYNOTIFY", "k"}} {
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		c, err := statestore.ParseCommand(statestore.AppendRequest(nil, bs...))
		if err != nil {
			t.Fatal(err)
		}
		cmds[args[0]] = &c
	}
	for _, tc := range []struct {
		mode  store.FlushMode
		waits map[string]bool
	}{
		{store.FlushAsync, map[string]bool{}},
		{store.FlushSync, map[string]bool{"SET": true, "DEL": true, "VDEL": true}},
	} {
		b := testBroker(t, t.TempDir(), func(o *Options) { o.Store.FlushMode = tc.mode })
		s := ssOpen(t, b, nil)
		for name, c := range cmds {
			if got := s.Waits(c); got != tc.waits[name] {
				t.Errorf("flush mode %v: Waits(%s) = %v", tc.mode, name, got)
			}
		}
		ssDo(t, s, "c", "SET", "k", "v")
		if tc.mode == store.FlushSync && b.Store().FlushedPhysicalOffset() < b.Store().MaxPhysicalOffset() {
			t.Errorf("sync flush: SET answered before its record was flushed")
		}
		_ = s.Close()
	}
}

// TestStateStoreSnapshotFileStreamed: a shard's snapshot file, written
// into the temp file as it is encoded (writeShardSnapshot), is the file
// format around the engine's own snapshot bytes, whole, with a CRC that
// checks; a second snapshot after more writes replaces it.
func TestStateStoreSnapshotFileStreamed(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	s := ssOpen(t, b, func(o *StateStoreOptions) { o.Shards = 2 })
	defer func() { _ = s.Close(); _ = b.Close() }()
	val := strings.Repeat("v", 300) // 2,000 keys: more than one buffer of the engine's writer
	for round, n := range []int{2000, 2500} {
		for i := 0; i < n; i++ {
			ssDo(t, s, "c", "SET", "key-"+strconv.Itoa(i), val+strconv.Itoa(round))
		}
		for shard := 0; shard < 2; shard++ {
			path := filepath.Join(dir, "statestore", fmt.Sprintf("shard-%d.snap", shard))
			var want bytes.Buffer
			if err := s.Engine(shard).Snapshot(&want); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				// Written once its entries are flushed (async flush).
				if err := s.Snapshot(); err != nil {
					t.Fatal(err)
				}
				data, err := os.ReadFile(path)
				if err == nil {
					_, state, derr := decodeShardSnapshot(data, ssSnapMagic, int32(shard))
					if derr != nil {
						t.Fatalf("round %d shard %d: %v", round, shard, derr)
					}
					if bytes.Equal(state, want.Bytes()) {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d shard %d: no snapshot of the engine's state within 30 s (%v)", round, shard, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// TestStateStoreHostWatcherFrontAfterUnwatchedTraffic: requests admitted
// before any watch exists record no front end (admit skips the client
// table then); the first KEYNOTIFY records its front end, so a change
// made through another front end is pushed to the watcher's, and a
// client that moved to another front end keeps the registrations made
// through it when the old front end reports its connection gone.
func TestStateStoreHostWatcherFrontAfterUnwatchedTraffic(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	a, other := &ssSink{}, &ssSink{}
	invoke := func(sink protocol.StateStoreSink, client string, args ...string) *protocol.StateStoreResponse {
		t.Helper()
		return ssInvokeLocal(t, s, sink, client, args...)
	}
	// The watcher-to-be talks through other first, while nobody watches.
	invoke(other, "w", "SET", "k", "v0")
	invoke(other, "w", "GET", "k")
	if r := invoke(a, "w", "KEYNOTIFY", "k"); string(r.Reply) != "+OK\r\n" {
		t.Fatalf("keynotify: %q", r.Reply)
	}
	r := invoke(other, "c", "SET", "k", "v1")
	if len(r.Notifications) != 0 {
		t.Fatalf("other front end got the watcher's notification: %+v", r.Notifications)
	}
	if got := a.take(); len(got) != 1 || got[0].ClientID != "w" || string(got[0].Value) != "v1" {
		t.Fatalf("pushed to the watcher's front end: %+v", got)
	}
	// The watcher moves to other and registers again there; a's late
	// report of the old connection drops nothing.
	invoke(other, "w", "KEYNOTIFY", "k")
	if n := s.DropClientOf("w", a); n != 0 {
		t.Fatalf("old front end's drop removed %d registrations", n)
	}
	r = invoke(a, "c", "SET", "k", "v2")
	if len(r.Notifications) != 0 {
		t.Fatalf("front end a got the moved watcher's notification: %+v", r.Notifications)
	}
	if got := other.take(); len(got) != 1 || got[0].ClientID != "w" || string(got[0].Value) != "v2" {
		t.Fatalf("pushed to the watcher's new front end: %+v", got)
	}
}

// A sink has one peer, whichever sink was seen last (sinkPeer keeps the
// last one): peers are compared with ==, so a sink's requests must all
// map to the same one, and two sinks never to the same one.
func TestStateStoreSinkPeerStable(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	a, other := &ssSink{}, &ssSink{}
	pa, po := s.sinkPeer(a), s.sinkPeer(other)
	if pa == po {
		t.Fatal("two sinks share a peer")
	}
	for i := 0; i < 3; i++ {
		if got := s.sinkPeer(a); got != pa {
			t.Fatalf("round %d: sink a got another peer", i)
		}
		if got := s.sinkPeer(a); got != pa {
			t.Fatalf("round %d: sink a, again: another peer", i)
		}
		if got := s.sinkPeer(other); got != po {
			t.Fatalf("round %d: the other sink got another peer", i)
		}
	}
}
