package ha

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store"
)

// TestStoreHAControlledHelloPinned pins the epoch extension of the hello.
func TestStoreHAControlledHelloPinned(t *testing.T) {
	b, err := AppendHello(nil, Hello{SegmentSize: 0x10000, MaxOffset: 0x0300, BrokerName: "g", Controlled: true, BrokerID: 2,
		Epoch: 3, Epochs: []store.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 0x0200}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "53474841" + "0001" + "0001" + "0000000000010000" + "0000000000000000" + "0000000000000300" +
		"0001" + "67" + "0000" +
		"0000000000000002" + "00000003" + "0002" + "00000001" + "0000000000000000" + "00000003" + "0000000000000200"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("hello\n got %s\nwant %s", got, want)
	}
	h, n, err := DecodeHello(append(b, 0xEE))
	if err != nil || n != len(b) || !h.Controlled || h.BrokerID != 2 || h.Epoch != 3 || len(h.Epochs) != 2 || h.Epochs[1].StartOffset != 0x200 {
		t.Fatalf("decode %+v %d %v", h, n, err)
	}
	for cut := 0; cut < len(b); cut++ {
		if _, _, err := DecodeHello(b[:cut]); !errors.Is(err, errShort) && cut > 4 {
			t.Fatalf("hello cut at %d: %v", cut, err)
		}
		if cut > 8 && helloNeed(b[:cut]) <= cut {
			t.Fatalf("helloNeed(%d bytes) = %d", cut, helloNeed(b[:cut]))
		}
	}
	bad := slices.Clone(b)
	bad[len(bad)-9] = 0 // second entry epoch 0
	if _, _, err := DecodeHello(bad); !errors.Is(err, ErrProtocol) {
		t.Fatalf("bad entry: %v", err)
	}
}

func controlledHA(name string, id int64, epoch int32) Options {
	o := fastHA(name)
	o.Controlled, o.BrokerID, o.Epoch = true, id, epoch
	return o
}

func serveControlled(t *testing.T, s *store.Store, o Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(s, ln, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func clientControlled(t *testing.T, s *store.Store, o Options, addr string) *Client {
	t.Helper()
	cli, err := StartClient(s, o, func() string { return addr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestStoreHAControlledFailover: the old master's unreplicated tail is cut
// when it comes back as the slave of the broker that replaced it; the two
// logs, queues and epoch histories end up identical.
func TestStoreHAControlledFailover(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, filepath.Join(dir, "a"), nil) // master of epoch 1
	b := openTest(t, filepath.Join(dir, "b"), nil) // its slave, master of epoch 2
	if _, err := a.StartEpoch(1); err != nil {
		t.Fatal(err)
	}
	srvA := serveControlled(t, a, controlledHA("g", 1, 1))
	srvA.SetSyncStateSet([]int64{1, 2}, 1)
	cliB := clientControlled(t, b, controlledHA("g", 2, 1), srvA.Addr().String())
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(srvA.Slaves()) != 1 {
			return errors.New("slave not connected")
		}
		return nil
	})
	body := strings.Repeat("y", 600)
	for i := range 150 {
		mustPut(t, a, msgSpec{topic: "T", qid: int32(i % 2), body: body})
	}
	waitCaughtUp(t, a, b)
	if got := b.Epochs(); !slices.Equal(got, a.Epochs()) {
		t.Fatalf("slave epochs %v, master %v", got, a.Epochs())
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if c := srvA.ConfirmOffset(); c != a.MaxPhysicalOffset() {
			return fmt.Errorf("confirm %d of %d", c, a.MaxPhysicalOffset())
		}
		if got := a.MaxOffset("T", 0) + a.MaxOffset("T", 1); got != 150 {
			return fmt.Errorf("%d of 150 visible", got)
		}
		return nil
	})
	// The slave stops; the master writes on (nobody confirms it: with the
	// slave in the set, consumers do not see it).
	_ = cliB.Close()
	confirmed := a.MaxPhysicalOffset()
	for i := range 40 {
		mustPut(t, a, msgSpec{topic: "T", qid: int32(i % 2), body: "unacked-" + fmt.Sprint(i)})
	}
	time.Sleep(50 * time.Millisecond) // the dispatcher would have moved by now
	if got := a.MaxOffset("T", 0) + a.MaxOffset("T", 1); got != 150 {
		t.Fatalf("%d messages visible on the master, want the 150 confirmed", got)
	}
	_ = srvA.Close()

	// B takes over at epoch 2 and writes.
	if _, err := b.DropPartialTail(); err != nil {
		t.Fatal(err)
	}
	if e, err := b.StartEpoch(2); err != nil || e.StartOffset != confirmed {
		t.Fatalf("epoch 2 at %v (%v), want %d", e, err, confirmed)
	}
	srvB := serveControlled(t, b, controlledHA("g", 2, 2))
	for i := range 60 {
		mustPut(t, b, msgSpec{topic: "T", qid: int32(i % 2), body: "e2-" + fmt.Sprint(i)})
	}
	// A stale client (following epoch 3) is refused by B.
	stale := openTest(t, filepath.Join(dir, "c"), nil)
	cliC := clientControlled(t, stale, controlledHA("g", 3, 3), srvB.Addr().String())
	testutil.Eventually(t, 5*time.Second, func() error {
		if !errors.Is(cliC.Err(), ErrStaleEpoch) {
			return fmt.Errorf("client err %v", cliC.Err())
		}
		return nil
	})
	_ = cliC.Close()

	// A comes back as B's slave: its 40 unacknowledged messages go.
	var cut atomic.Int64
	cut.Store(-1)
	oa := controlledHA("g", 1, 2)
	oa.OnTruncate = func(off int64) error { cut.Store(off); return nil }
	cliA := clientControlled(t, a, oa, srvB.Addr().String())
	waitCaughtUp(t, b, a)
	if cut.Load() != confirmed || cliA.Truncations() != 1 {
		t.Fatalf("cut at %d (%d truncations), want %d", cut.Load(), cliA.Truncations(), confirmed)
	}
	sameLog(t, a, b, 0, b.MaxPhysicalOffset())
	if !slices.Equal(a.Epochs(), b.Epochs()) {
		t.Fatalf("epochs %v vs %v", a.Epochs(), b.Epochs())
	}
	for q := int32(0); q < 2; q++ {
		ma, mb := readAll(t, a, "T", q), readAll(t, b, "T", q)
		if len(ma) != len(mb) || len(ma) != 105 {
			t.Fatalf("queue %d: %d vs %d messages", q, len(ma), len(mb))
		}
		for i := range ma {
			if string(ma[i].Body) != string(mb[i].Body) || strings.HasPrefix(string(ma[i].Body), "unacked") {
				t.Fatalf("queue %d message %d: %q vs %q", q, i, ma[i].Body, mb[i].Body)
			}
		}
	}
}

// TestStoreHASyncStateSetWait: a write waits for every member of the sync
// state set; a member that stops replicating holds writes (and what
// consumers see) until it leaves the set; too small a set refuses at once.
func TestStoreHASyncStateSetWait(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, filepath.Join(dir, "m"), nil)
	if _, err := m.StartEpoch(1); err != nil {
		t.Fatal(err)
	}
	srv := serveControlled(t, m, controlledHA("g", 1, 1))
	s2 := openTest(t, filepath.Join(dir, "s2"), nil)
	s3 := openTest(t, filepath.Join(dir, "s3"), nil)
	clientControlled(t, s2, controlledHA("g", 2, 1), srv.Addr().String())
	c3 := clientControlled(t, s3, controlledHA("g", 3, 1), srv.Addr().String())
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(srv.Slaves()) != 2 {
			return fmt.Errorf("%d slaves", len(srv.Slaves()))
		}
		return nil
	})
	srv.SetSyncStateSet([]int64{1, 2, 3}, 2)
	wait := func(d time.Duration) error {
		r := mustPut(t, m, msgSpec{topic: "T", body: "x"})
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return srv.WaitAck(ctx, r.PhysicalOffset+int64(r.WroteBytes))
	}
	for range 10 {
		if err := wait(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, sl := range srv.Slaves() {
		if sl.CaughtUp.IsZero() || time.Since(sl.CaughtUp) > 5*time.Second || sl.BrokerID < 2 {
			t.Fatalf("slave %+v", sl)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := m.MaxOffset("T", 0); got != 10 {
			return fmt.Errorf("%d of 10 visible", got)
		}
		return nil
	})
	_ = c3.Close()
	visible := m.MaxOffset("T", 0)
	if err := wait(300 * time.Millisecond); !errors.Is(err, ErrSlaveAckTimeout) {
		t.Fatalf("a member stopped: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := m.MaxOffset("T", 0); got != visible {
		t.Fatalf("consumers see %d messages, only %d are on every member", got, visible)
	}
	srv.SetSyncStateSet([]int64{1, 2}, 2) // 3 leaves the set
	if err := wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := m.MaxOffset("T", 0); got != 12 {
			return fmt.Errorf("%d visible", got)
		}
		return nil
	})
	srv.SetSyncStateSet([]int64{1}, 2)
	if err := wait(5 * time.Second); !errors.Is(err, ErrSlaveNotAvailable) {
		t.Fatalf("set below the minimum: %v", err)
	}
}

// TestStoreHASyncStateSetUnconfirmedMember: a slave that has every write
// but is not yet in the set the controller holds does not count towards
// the fewest members. A write waits (and times out, or is answered when
// the controller's set grows), and WhenAcked's waiters are answered when
// the set changes.
func TestStoreHASyncStateSetUnconfirmedMember(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, filepath.Join(dir, "m"), nil)
	if _, err := m.StartEpoch(1); err != nil {
		t.Fatal(err)
	}
	srv := serveControlled(t, m, controlledHA("g", 1, 1))
	s2 := openTest(t, filepath.Join(dir, "s2"), nil)
	clientControlled(t, s2, controlledHA("g", 2, 1), srv.Addr().String())
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(srv.Slaves()) != 1 {
			return fmt.Errorf("%d slaves", len(srv.Slaves()))
		}
		return nil
	})
	put := func() int64 {
		r := mustPut(t, m, msgSpec{topic: "T", body: "x"})
		return r.PhysicalOffset + int64(r.WroteBytes)
	}
	// Slave 2 is a candidate: its acks are needed, the controller's set
	// is the master alone.
	srv.SetSyncStateSetChanging([]int64{1, 2}, []int64{1}, 2)
	end := put()
	testutil.Eventually(t, 5*time.Second, func() error {
		if a := srv.AckedBy(2); a < end {
			return fmt.Errorf("slave 2 at %d, write ends at %d", a, end)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := srv.WaitAck(ctx, end)
	cancel()
	if !errors.Is(err, ErrSlaveAckTimeout) {
		t.Fatalf("acknowledged with the controller's set below the minimum: %v", err)
	}
	answered := make(chan error, 1)
	srv.WhenAcked(end, time.Minute, func(err error) { answered <- err })
	select {
	case err := <-answered:
		t.Fatalf("WhenAcked answered before the controller held the slave: %v", err)
	default:
	}
	// The controller takes slave 2 into its set: the waiter is answered.
	srv.SetSyncStateSetChanging([]int64{1, 2}, []int64{1, 2}, 2)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("after the controller held the slave: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WhenAcked not answered after the set grew")
	}
	// Too few members even counting the candidates: refused at once.
	srv.SetSyncStateSetChanging([]int64{1}, []int64{1}, 2)
	if err := srv.WaitAck(context.Background(), put()); !errors.Is(err, ErrSlaveNotAvailable) {
		t.Fatalf("members below the minimum: %v", err)
	}
}
