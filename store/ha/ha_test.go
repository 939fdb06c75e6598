package ha

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// testOptions are small sizes so tests cross segment boundaries.
func testOptions(root string) store.Options {
	o := store.DefaultOptions(root)
	o.SegmentSize = 64 << 10
	o.CQEntriesPerFile = 64
	o.IndexSlots = 32
	o.IndexEntries = 200
	o.MaxMessageSize = 16 << 10
	o.FlushInterval = 20 * time.Millisecond
	o.WarmSegments = false
	o.DiskUsage = func(string) (float64, error) { return 0.1, nil }
	return o
}

func openTest(t testing.TB, root string, mutate func(*store.Options)) *store.Store {
	t.Helper()
	o := testOptions(root)
	if mutate != nil {
		mutate(&o)
	}
	s, err := store.Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type msgSpec struct {
	topic string
	qid   int32
	body  string
	tags  string
	keys  string
}

func mustPut(t testing.TB, s *store.Store, sp msgSpec) store.PutResult {
	t.Helper()
	var p record.Properties
	if sp.tags != "" {
		p.Set(record.PropertyTags, sp.tags)
	}
	if sp.keys != "" {
		p.Set(record.PropertyKeys, sp.keys)
	}
	r, err := s.Put(context.Background(), &record.Message{Topic: sp.topic, QueueID: sp.qid, BornTimestamp: 1_700_000_000_000,
		BornHost: netip.MustParseAddrPort("10.0.0.5:50000"), Body: []byte(sp.body), Properties: p.String()})
	if err != nil || r.Status != store.PutOK {
		t.Fatalf("Put %+v: %v %v", sp, r.Status, err)
	}
	return r
}

// readAll reads a queue from its min offset to its max offset.
func readAll(t testing.TB, s *store.Store, topic string, qid int32) []*record.Message {
	t.Helper()
	var out []*record.Message
	for off := s.MinOffset(topic, qid); off < s.MaxOffset(topic, qid); {
		r, err := s.GetMessages(topic, qid, off, 32, nil)
		if err != nil || r.Status != store.GetFound {
			t.Fatalf("GetMessages(%s,%d,%d): %v", topic, qid, off, err)
		}
		for _, b := range r.Buffers {
			m, _, err := record.Decode(b, true)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		off = r.NextBeginOffset
		r.Release()
	}
	return out
}

// TestStoreHAWireBytes pins the HA wire format (wire.go).
func TestStoreHAWireBytes(t *testing.T) {
	hello, err := AppendHello(nil, Hello{SegmentSize: 0x10000, MinOffset: 1, MaxOffset: 0x0203, BrokerName: "ab", BrokerAddr: "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := "53474841" + "0001" + "0000" + "0000000000010000" + "0000000000000001" + "0000000000000203" +
		"0002" + "6162" + "0001" + "63"
	if got := hex.EncodeToString(hello); got != want {
		t.Fatalf("hello\n got %s\nwant %s", got, want)
	}
	h, n, err := DecodeHello(append(hello, 0xEE))
	if err != nil || n != len(hello) || h.BrokerName != "ab" || h.BrokerAddr != "c" || h.MaxOffset != 0x203 || h.SegmentSize != 0x10000 {
		t.Fatalf("decode hello: %+v %d %v", h, n, err)
	}
	if got := hex.EncodeToString(AppendReport(nil, 0x0102030405060708)); got != "0102030405060708" {
		t.Fatalf("report %s", got)
	}
	if got := hex.EncodeToString(AppendChunkHeader(nil, 0x1122, 0x8000)); got != "0000000000001122"+"00008000" {
		t.Fatalf("chunk header %s", got)
	}
	if _, _, err := DecodeHello(hello[:10]); !errors.Is(err, errShort) {
		t.Fatalf("short hello: %v", err)
	}
	bad := bytes.Clone(hello)
	bad[0] = 'X'
	if _, _, err := DecodeHello(bad); !errors.Is(err, ErrProtocol) {
		t.Fatalf("bad magic: %v", err)
	}
	if _, err := AppendHello(nil, Hello{BrokerName: strings.Repeat("x", 256)}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("long name: %v", err)
	}
}

// TestStoreHAParseChunks: complete chunks are delivered, a partial one is
// left for later, oversized ones are refused.
func TestStoreHAParseChunks(t *testing.T) {
	var b []byte
	b = append(AppendChunkHeader(b, 100, 3), 'a', 'b', 'c')
	b = AppendChunkHeader(b, 103, 0)
	b = append(AppendChunkHeader(b, 103, 5), 'x') // incomplete
	var got []string
	used, err := ParseChunks(b, func(off int64, d []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", off, d))
		return nil
	})
	if err != nil || used != 12+3+12 || strings.Join(got, ",") != "100:abc,103:" {
		t.Fatalf("used %d err %v got %v", used, err, got)
	}
	over := AppendChunkHeader(nil, 0, MaxChunk+1)
	if _, err := ParseChunks(over, func(int64, []byte) error { return nil }); !errors.Is(err, ErrProtocol) {
		t.Fatalf("oversized chunk: %v", err)
	}
}

func fastHA(name string) Options {
	return Options{BrokerName: name, BrokerAddr: "127.0.0.1:1", HeartbeatInterval: 100 * time.Millisecond,
		IdleTimeout: time.Second, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}
}

func startMasterHA(t *testing.T, s *store.Store, name string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(s, ln, fastHA(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func startSlaveHA(t *testing.T, s *store.Store, name, addr string) *Client {
	t.Helper()
	cli, err := StartClient(s, fastHA(name), func() string { return addr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// waitSlaveConnected waits until srv has a slave past the handshake.
func waitSlaveConnected(t *testing.T, srv *Server) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, ok := srv.AckOffset(); !ok {
			return errors.New("no slave yet")
		}
		return nil
	})
}

func waitCaughtUp(t *testing.T, master, slave *store.Store) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if m, s := master.MaxPhysicalOffset(), slave.MaxPhysicalOffset(); m != s {
			return fmt.Errorf("slave at %d, master at %d", s, m)
		}
		if d, c := slave.DispatchedPhysicalOffset(), slave.MaxPhysicalOffset(); d != c {
			return fmt.Errorf("slave dispatched %d of %d", d, c)
		}
		// Callers compare queues next: the master's own dispatch may lag
		// its log under load too.
		if d, c := master.DispatchedPhysicalOffset(), master.MaxPhysicalOffset(); d != c {
			return fmt.Errorf("master dispatched %d of %d", d, c)
		}
		return nil
	})
}

// sameLog compares the commitlog bytes of two stores in [from, to).
func sameLog(t *testing.T, a, b *store.Store, from, to int64) {
	t.Helper()
	for pos := from; pos < to; {
		ra, err := a.ReadRaw(pos, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.ReadRaw(pos, ra.TotalBytes)
		if err != nil {
			t.Fatal(err)
		}
		if ra.TotalBytes == 0 || !bytes.Equal(ra.Buffers[0], rb.Buffers[0]) {
			t.Fatalf("logs differ at %d (%d/%d bytes)", pos, ra.TotalBytes, rb.TotalBytes)
		}
		pos += int64(ra.TotalBytes)
		ra.Release()
		rb.Release()
	}
}

// TestStoreHAReplicates: a slave receives the master's log byte for byte
// across segments and builds the same queues; it survives a restart and a
// dropped connection, and an empty slave starts at the master's last
// segment.
func TestStoreHAReplicates(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, filepath.Join(dir, "m"), nil)
	srv := startMasterHA(t, m, "g")
	body := strings.Repeat("x", 700)
	for i := range 300 {
		mustPut(t, m, msgSpec{topic: "T", qid: int32(i % 3), body: body, tags: "a", keys: fmt.Sprint("k", i)})
	}
	slaveRoot := filepath.Join(dir, "s")
	s, err := store.Open(testOptions(slaveRoot))
	if err != nil {
		t.Fatal(err)
	}
	cli := startSlaveHA(t, s, "g", srv.Addr().String())
	// A fresh slave starts at the master's last segment.
	last := m.LastSegmentOffset()
	testutil.Eventually(t, 5*time.Second, func() error {
		if s.MaxPhysicalOffset() != m.MaxPhysicalOffset() {
			return fmt.Errorf("slave %d master %d", s.MaxPhysicalOffset(), m.MaxPhysicalOffset())
		}
		return nil
	})
	if s.MinPhysicalOffset() != last {
		t.Fatalf("fresh slave starts at %d, want the master's last segment %d", s.MinPhysicalOffset(), last)
	}
	_ = cli.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		mustPut(t, m, msgSpec{topic: "T", qid: 0, body: body, tags: "c"})
	}

	// Restart the slave on its data: it resumes from its own end.
	s2 := openTest(t, slaveRoot, nil)
	if s2.MinPhysicalOffset() != last {
		t.Fatalf("restarted slave starts at %d", s2.MinPhysicalOffset())
	}
	cli2 := startSlaveHA(t, s2, "g", srv.Addr().String())
	waitCaughtUp(t, m, s2)
	for i := range 300 {
		mustPut(t, m, msgSpec{topic: "T", qid: int32(i % 3), body: body, tags: "b"})
	}
	waitCaughtUp(t, m, s2)
	cli2.DropConnection()
	for i := range 50 {
		mustPut(t, m, msgSpec{topic: "U", qid: 0, body: fmt.Sprint("u", i)})
	}
	waitCaughtUp(t, m, s2)
	if cli2.Sessions() < 2 {
		t.Fatalf("sessions %d after a dropped connection", cli2.Sessions())
	}
	sameLog(t, m, s2, s2.MinPhysicalOffset(), m.MaxPhysicalOffset())
	for _, q := range []struct {
		topic string
		qid   int32
	}{{"T", 2}, {"U", 0}} {
		if a, b := m.MaxOffset(q.topic, q.qid), s2.MaxOffset(q.topic, q.qid); a != b {
			t.Fatalf("%s/%d: master max %d, slave %d", q.topic, q.qid, a, b)
		}
	}
	got := readAll(t, s2, "U", 0)
	if len(got) != 50 || string(got[49].Body) != "u49" {
		t.Fatalf("slave queue U/0: %d messages", len(got))
	}
	// Slave ack reached the master.
	testutil.Eventually(t, 5*time.Second, func() error {
		if a, ok := srv.AckOffset(); !ok || a != m.MaxPhysicalOffset() {
			return fmt.Errorf("ack %d %v", a, ok)
		}
		return nil
	})
}

// TestStoreHAWaitAck: sync replication waits for the slave, fails fast
// without one, and times out when acks stop.
func TestStoreHAWaitAck(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, filepath.Join(dir, "m"), nil)
	srv := startMasterHA(t, m, "g")
	r := mustPut(t, m, msgSpec{topic: "T", body: "one"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.WaitAck(ctx, r.PhysicalOffset+int64(r.WroteBytes)); !errors.Is(err, ErrSlaveNotAvailable) {
		t.Fatalf("no slave: %v", err)
	}
	s := openTest(t, filepath.Join(dir, "s"), nil)
	cli := startSlaveHA(t, s, "g", srv.Addr().String())
	waitSlaveConnected(t, srv)
	for i := range 20 {
		r := mustPut(t, m, msgSpec{topic: "T", body: fmt.Sprint("m", i)})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := srv.WaitAck(ctx, r.PhysicalOffset+int64(r.WroteBytes))
		cancel()
		if err != nil {
			t.Fatalf("put %d: %v (slave err %v)", i, err, cli.Err())
		}
		if s.MaxPhysicalOffset() < r.PhysicalOffset+int64(r.WroteBytes) {
			t.Fatalf("acked before the slave had it")
		}
	}
	// Stop the slave's client: the master drops the slave after the
	// connection closes, and WaitAck reports no slave.
	_ = cli.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(srv.Slaves()) != 0 {
			return errors.New("slave still listed")
		}
		return nil
	})
	r = mustPut(t, m, msgSpec{topic: "T", body: "late"})
	if err := srv.WaitAck(context.Background(), r.PhysicalOffset+int64(r.WroteBytes)); !errors.Is(err, ErrSlaveNotAvailable) {
		t.Fatalf("after the slave left: %v", err)
	}
}

// TestStoreHARefusesWrongMaster: another group's master, another segment
// size, or a slave ahead of its master: nothing is appended or cut.
func TestStoreHARefusesWrongMaster(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, filepath.Join(dir, "m"), nil)
	srv := startMasterHA(t, m, "g")
	mustPut(t, m, msgSpec{topic: "T", body: "m"})

	check := func(name string, s *store.Store, group string, want error) {
		t.Helper()
		before := s.MaxPhysicalOffset()
		cli := startSlaveHA(t, s, group, srv.Addr().String())
		testutil.Eventually(t, 5*time.Second, func() error {
			if err := cli.Err(); !errors.Is(err, want) {
				return fmt.Errorf("%s: err %v, want %v", name, err, want)
			}
			return nil
		})
		if got, wantR := cli.Refusal(), refusalOf(want); got != wantR || got == "" {
			t.Fatalf("%s: Refusal %q, want %q", name, got, wantR)
		}
		_ = cli.Close()
		if s.MaxPhysicalOffset() != before {
			t.Fatalf("%s: slave log moved from %d to %d", name, before, s.MaxPhysicalOffset())
		}
	}
	other := openTest(t, filepath.Join(dir, "other"), nil)
	check("other group", other, "h", ErrMismatch)
	seg := openTest(t, filepath.Join(dir, "seg"), func(o *store.Options) { o.SegmentSize = 128 << 10 })
	check("segment size", seg, "g", ErrMismatch)
	ahead := openTest(t, filepath.Join(dir, "ahead"), nil)
	for range 10 {
		mustPut(t, ahead, msgSpec{topic: "T", body: "a longer body than the master has"})
	}
	// Dispatch is asynchronous: the queue holds all ten before the check.
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := ahead.MaxOffset("T", 0); n != 10 {
			return fmt.Errorf("ahead slave dispatched %d of 10", n)
		}
		return nil
	})
	check("ahead", ahead, "g", ErrSlaveAhead)
	if got := readAll(t, ahead, "T", 0); len(got) != 10 {
		t.Fatalf("ahead slave lost messages: %d", len(got))
	}
}

// TestStoreHAProtocolErrors: a master that is not an HA peer, and one that
// sends a chunk at the wrong offset.
func TestStoreHAProtocolErrors(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, filepath.Join(dir, "s"), nil)
	mustPut(t, s, msgSpec{topic: "T", body: "local"})
	before := s.MaxPhysicalOffset()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := readHello(c); err != nil {
					return
				}
				hello, _ := AppendHello(nil, Hello{SegmentSize: s.Options().SegmentSize, MaxOffset: 1 << 20, BrokerName: "g"})
				_, _ = c.Write(hello)
				var rb [8]byte
				_, _ = c.Read(rb[:])
				_, _ = c.Write(append(AppendChunkHeader(nil, 5, 3), 1, 2, 3))
				time.Sleep(time.Second)
			}()
		}
	}()
	cli := startSlaveHA(t, s, "g", ln.Addr().String())
	testutil.Eventually(t, 5*time.Second, func() error {
		if err := cli.Err(); !errors.Is(err, ErrOffsetMismatch) {
			return fmt.Errorf("err %v", err)
		}
		return nil
	})
	_ = cli.Close()
	if s.MaxPhysicalOffset() != before {
		t.Fatalf("slave log moved")
	}
}

// FuzzStoreHAChunks: the slave-side chunk decoder never panics, never
// returns more than it was given, and delivers only in-bounds chunks.
func FuzzStoreHAChunks(f *testing.F) {
	f.Add(append(AppendChunkHeader(nil, 0, 3), 1, 2, 3))
	f.Add(AppendChunkHeader(nil, -1, 0))
	f.Add(AppendChunkHeader(nil, 1, 1<<31))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		used, _ := ParseChunks(b, func(off int64, d []byte) error {
			if off < 0 || len(d) > MaxChunk {
				t.Fatalf("bad chunk delivered: %d %d", off, len(d))
			}
			total += ChunkHeaderSize + len(d)
			return nil
		})
		if used < 0 || used > len(b) || used != total {
			t.Fatalf("used %d of %d (chunks %d)", used, len(b), total)
		}
	})
}

// FuzzStoreHAHello: the handshake decoder never panics and round-trips
// what it accepts.
func FuzzStoreHAHello(f *testing.F) {
	h, _ := AppendHello(nil, Hello{SegmentSize: 4096, MaxOffset: 10, BrokerName: "broker-a", BrokerAddr: "127.0.0.1:10911"})
	f.Add(h)
	f.Add(h[:20])
	hc, _ := AppendHello(nil, Hello{SegmentSize: 4096, MaxOffset: 10, BrokerName: "g", Controlled: true, BrokerID: 3, Epoch: 2,
		Epochs: []store.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 10}}})
	f.Add(hc)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, err := DecodeHello(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("used %d of %d", n, len(b))
		}
		again, err := AppendHello(nil, v)
		if err != nil || !bytes.Equal(again, b[:n]) {
			t.Fatalf("no round trip: %x vs %x (%v)", again, b[:n], err)
		}
	})
}

// TestStoreHAWhenAcked: the callback form of WaitAck answers at once
// without a slave, after the slave's report with one, on time when the
// slave cannot reach the offset, and when the slave leaves.
func TestStoreHAWhenAcked(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, filepath.Join(dir, "m"), nil)
	srv := startMasterHA(t, m, "g")
	r := mustPut(t, m, msgSpec{topic: "T", body: "one"})
	got := make(chan error, 64)
	cb := func(err error) { got <- err }
	srv.WhenAcked(r.PhysicalOffset+int64(r.WroteBytes), time.Second, cb)
	if err := <-got; !errors.Is(err, ErrSlaveNotAvailable) {
		t.Fatalf("no slave: %v", err)
	}
	s := openTest(t, filepath.Join(dir, "s"), nil)
	cli := startSlaveHA(t, s, "g", srv.Addr().String())
	waitSlaveConnected(t, srv)
	const n = 20
	for i := range n {
		r := mustPut(t, m, msgSpec{topic: "T", body: fmt.Sprint("m", i)})
		end := r.PhysicalOffset + int64(r.WroteBytes)
		srv.WhenAcked(end, 5*time.Second, func(err error) {
			if err == nil && s.MaxPhysicalOffset() < end {
				err = fmt.Errorf("acknowledged %d before the slave had it (%d)", end, s.MaxPhysicalOffset())
			}
			got <- err
		})
	}
	for range n {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	// An offset the slave cannot reach (nothing is written there) times out.
	start := time.Now()
	srv.WhenAcked(m.MaxPhysicalOffset()+1000, 100*time.Millisecond, cb)
	if err := <-got; !errors.Is(err, ErrSlaveAckTimeout) || time.Since(start) > 5*time.Second {
		t.Fatalf("unreachable offset: %v after %v", err, time.Since(start))
	}
	// A waiter left when the last slave goes is told at once.
	srv.WhenAcked(m.MaxPhysicalOffset()+1000, time.Hour, cb)
	_ = cli.Close()
	select {
	case err := <-got:
		if !errors.Is(err, ErrSlaveNotAvailable) {
			t.Fatalf("after the slave left: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not answered when the slave left")
	}
	// Close answers the waiters left.
	startSlaveHA(t, s, "g", srv.Addr().String())
	waitSlaveConnected(t, srv)
	srv.WhenAcked(m.MaxPhysicalOffset()+1000, time.Hour, cb)
	_ = srv.Close()
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("at close: %v", err)
	}
}

// A slave whose own disk fills stops replicating without reconnecting
// over and over (it used to reconnect every ReconnectMin, each session
// refused at its first chunk, logging a line on both sides each time: a
// few lines a second for as long as the disk stayed full), and resumes by
// itself once the disk has room, ending with the master's bytes.
func TestStoreHASlaveDiskFullWaitsThenResumes(t *testing.T) {
	dir := t.TempDir()
	var mlog, slaveLog lockedLog
	master := openTest(t, filepath.Join(dir, "m"), nil)
	var usage atomic.Value
	usage.Store(0.1)
	slave := openTest(t, filepath.Join(dir, "s"), func(o *store.Options) {
		o.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
	})
	mo := fastHA("b")
	mo.Logger = mlog.logger()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(master, ln, mo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	so := fastHA("b")
	so.Logger = slaveLog.logger()
	cli, err := StartClient(slave, so, func() string { return ln.Addr().String() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	for i := 0; i < 50; i++ {
		mustPut(t, master, msgSpec{topic: "T", qid: int32(i % 4), body: fmt.Sprintf("before-%d", i)})
	}
	waitCaughtUp(t, master, slave)

	usage.Store(0.99)
	testutil.WaitFor(t, 10*time.Second, "the slave's disk counted full", func() bool {
		refused, _ := slave.WritesRefused()
		return refused
	})
	for i := 0; i < 50; i++ {
		mustPut(t, master, msgSpec{topic: "T", qid: int32(i % 4), body: fmt.Sprintf("full-%d", i)})
	}
	testutil.WaitFor(t, 10*time.Second, "the session refused for the full disk", func() bool {
		return errors.Is(cli.Err(), store.ErrDiskFull)
	})
	// The master keeps taking writes; the slave does not come back for
	// them while its disk is full (at ReconnectMin = 20 ms it used to
	// reconnect dozens of times in this second).
	sessions := cli.Sessions()
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		mustPut(t, master, msgSpec{topic: "T", qid: 1, body: "while-full"})
	}
	if n := cli.Sessions() - sessions; n > 1 {
		t.Errorf("%d replication sessions while the slave's disk was full", n)
	}
	if n := strings.Count(slaveLog.String(), "level=WARN"); n > 2 {
		t.Errorf("%d warnings from the slave while its disk was full:\n%s", n, slaveLog.String())
	}
	if n := strings.Count(mlog.String(), "slave disconnected"); n > 1 {
		t.Errorf("%d disconnections logged by the master:\n%s", n, mlog.String())
	}

	usage.Store(0.1)
	waitCaughtUp(t, master, slave)
	sameLog(t, master, slave, 0, master.MaxPhysicalOffset())
	if !strings.Contains(slaveLog.String(), "replication resumes") {
		t.Errorf("no resume line:\n%s", slaveLog.String())
	}
}

// lockedLog is a text log a test reads while loggers write it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lockedLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
