package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/ha"
)

// dialFrom connects to addr from the loopback address local (any
// 127.0.0.0/8 address is this host's).
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, local, err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

// notice sends NOTIFY_METADATA_CHANGED to addr from local and returns
// the answer's code.
func notice(t *testing.T, local, addr string) int32 {
	t.Helper()
	return invokeFrom(t, local, addr, protocol.NewRequest(protocol.NotifyMetadataChanged, nil, nil)).Code
}

// invokeFrom sends req to addr from the loopback address local and
// returns the answer.
func invokeFrom(t *testing.T, local, addr string, req *protocol.Command) *protocol.Command {
	t.Helper()
	nc := dialFrom(t, local, addr)
	frame, err := protocol.EncodeFrame(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	resp, _, err := protocol.ReadFrame(nc, nil, 64<<20)
	if err != nil {
		t.Fatalf("answer to request %d from %s: %v", req.Code, local, err)
	}
	return resp
}

// TestClusterHASlaveTakesNoticeOnlyFromMaster: a slave takes
// NOTIFY_METADATA_CHANGED from its master's host (127.0.0.1 here) and
// refuses it (NO_PERMISSION) from any other (127.0.0.2), so a stranger
// cannot make it copy its master's tables at will. The master's own
// notices still bring a change at once.
func TestClusterHASlaveTakesNoticeOnlyFromMaster(t *testing.T) {
	c := startHACluster(t, Options{Slave: func(_ int, o *broker.Options) { o.SlaveSyncInterval = time.Hour }})
	m, s := c.Broker(0), c.Slave(0)
	topicsCopied(t, m, s, 20*time.Second)
	if code := notice(t, "127.0.0.2", s.Addr()); code != protocol.NoPermission {
		t.Fatalf("notice from 127.0.0.2: code %d, want %d", code, protocol.NoPermission)
	}
	if code := notice(t, "127.0.0.1", s.Addr()); code != protocol.Success {
		t.Fatalf("notice from the master's host: code %d", code)
	}
	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	const topic = "NoticeFromMaster"
	if err := a.CreateTopic(context.Background(), "TestCluster", admin.TopicConfig{Name: topic, ReadQueues: 3, WriteQueues: 3}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if tc, ok := s.Topics().Get(topic); !ok || tc.ReadQueueNums != 3 {
			return fmt.Errorf("slave's topic %+v (%v), want 3 queues", tc, ok)
		}
		return nil
	})
}

// TestClusterHAMasterNoticesOnlyTheHelloHost: a peer that connects to
// the master's HA port from 127.0.0.2 and claims, in its hello, the
// remoting address 127.0.0.1:P gets its metadata change notice at
// 127.0.0.2:P, the IP its HA connection came from: the master never dials
// the host the hello names. An offset change's notice carries the ext
// field scope=offsets, and goes to the same address.
func TestClusterHAMasterNoticesOnlyTheHelloHost(t *testing.T) {
	c := startHACluster(t, Options{})
	m := c.Broker(0)
	// The same port on both addresses: the claimed one and the peer's.
	own, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	t.Cleanup(func() { _ = own.Close() })
	port := own.Addr().(*net.TCPAddr).Port
	claimed, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Skipf("port %d not free on 127.0.0.1: %v", port, err)
	}
	t.Cleanup(func() { _ = claimed.Close() })
	// accepted gives the requests that reach ln, every frame of every
	// connection (the master keeps its connection for the next notice).
	// Its goroutines end at the test's cleanup, which waits for them.
	accepted := func(ln net.Listener) <-chan *protocol.Command {
		ch := make(chan *protocol.Command, 4)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			conns  []net.Conn // protected by mu
			closed bool       // protected by mu
		)
		done := make(chan struct{})
		t.Cleanup(func() {
			close(done)
			_ = ln.Close()
			mu.Lock()
			closed = true
			for _, nc := range conns {
				_ = nc.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				if closed {
					mu.Unlock()
					_ = nc.Close()
					return
				}
				conns = append(conns, nc)
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						cmd, _, err := protocol.ReadFrame(nc, nil, 1<<20)
						if err != nil {
							return
						}
						select {
						case ch <- cmd:
						case <-done:
							return
						}
					}
				}()
			}
		}()
		return ch
	}
	atOwn, atClaimed := accepted(own), accepted(claimed)

	// A fake slave: hello, the master's hello, a first report; then it
	// drains what the master streams.
	hc := dialFrom(t, "127.0.0.2", m.HAAddr())
	hello, err := ha.AppendHello(nil, ha.Hello{SegmentSize: m.Store().Options().SegmentSize, BrokerName: "broker-a",
		BrokerAddr: "127.0.0.1:" + strconv.Itoa(port)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Write(hello); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Write(binary.BigEndian.AppendUint64(nil, uint64(m.Store().MaxPhysicalOffset()))); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, hc) }()
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, sl := range m.HAServer().Slaves() {
			if h, _, _ := net.SplitHostPort(sl.Addr); h == "127.0.0.2" {
				return nil
			}
		}
		return errors.New("the fake slave is not connected")
	})
	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if err := a.CreateTopic(context.Background(), "TestCluster", admin.TopicConfig{Name: "NoticeHost", ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case cmd := <-atOwn:
		if cmd.Code != protocol.NotifyMetadataChanged {
			t.Fatalf("the peer's own address got request %d", cmd.Code)
		}
	case cmd := <-atClaimed:
		t.Fatalf("the master dialled the claimed host 127.0.0.1:%d (request %d)", port, cmd.Code)
	case <-time.After(20 * time.Second):
		t.Fatal("no notice at the peer's own address")
	}
	// An offset commit: the same notice with the ext field scope=offsets
	// (the slave then copies only the offsets), to the same address. The
	// field's name and value are the wire format a slave reads.
	m.Offsets().Commit("notice-group", "NoticeHost", 0, 7)
	// offsetNotice waits for the next scope=offsets notice whose delta
	// holds the entry key/queue (earlier ones: the topic's notices, or
	// deltas of changes made before).
	offsetNotice := func(key string, queue int32) (*protocol.Command, protocol.OffsetDelta) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case cmd := <-atOwn:
				if cmd.Code != protocol.NotifyMetadataChanged {
					t.Fatalf("the peer's own address got request %d", cmd.Code)
				}
				if cmd.ExtFields["scope"] != "offsets" {
					continue
				}
				var d protocol.OffsetDelta
				if err := protocol.DecodeJSON(cmd.Body, &d); err != nil {
					t.Fatalf("offset notice body %q: %v", cmd.Body, err)
				}
				if _, ok := d.OffsetTable[key][queue]; ok {
					return cmd, d
				}
			case cmd := <-atClaimed:
				t.Fatalf("the master dialled the claimed host 127.0.0.1:%d (request %d)", port, cmd.Code)
			case <-deadline:
				t.Fatalf("no offsets notice (ext field scope=offsets) holding %s queue %d at the peer's own address", key, queue)
			}
		}
	}
	_, d := offsetNotice("NoticeHost@notice-group", 0)
	if d.OffsetTable["NoticeHost@notice-group"][0] != 7 {
		t.Fatalf("offset notice delta %v, want NoticeHost@notice-group queue 0 at 7", d.OffsetTable)
	}
	// The notice carries the changes, not a request to copy the whole
	// table: 2,000 entries committed, then one more; the notice after that
	// one holds only it, and follows on from the earlier ones' range.
	for i := range 2000 {
		m.Offsets().Commit("bulk-group", "NoticeHost"+strconv.Itoa(i/8), int32(i%8), int64(i))
	}
	cmd, _ := offsetNotice("NoticeHost249@bulk-group", 7)
	to := cmd.ExtFields[protocol.FieldOffsetTo]
	m.Offsets().Commit("notice-group", "NoticeHost", 1, 9)
	cmd, d = offsetNotice("NoticeHost@notice-group", 1)
	if len(d.OffsetTable) != 1 || len(d.OffsetTable["NoticeHost@notice-group"]) != 1 || d.OffsetTable["NoticeHost@notice-group"][1] != 9 {
		t.Fatalf("offset notice after one commit carries %v, want only NoticeHost@notice-group queue 1 at 9", d.OffsetTable)
	}
	if f := cmd.ExtFields[protocol.FieldOffsetFrom]; f != to || cmd.ExtFields[protocol.FieldOffsetRun] == "" || cmd.ExtFields[protocol.FieldDelaySeq] == "" {
		t.Fatalf("offset notice fields %v, want offsetFrom %s (the last notice's offsetTo), offsetRun and delaySeq", cmd.ExtFields, to)
	}
	select {
	case cmd := <-atClaimed:
		t.Fatalf("the master dialled the claimed host 127.0.0.1:%d too (request %d)", port, cmd.Code)
	default:
	}
}
