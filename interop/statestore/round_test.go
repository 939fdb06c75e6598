package statestore

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/vfs"
)

// The state store's mutations of one MQTT poller round are written with
// one pwrite (bridge/statestore.go deferToRound, broker/statestore_defer.go):
// these tests pipeline requests from paho clients whose connections send
// everything a test queued in one write, so that a poller round serves
// many requests at once.

// corkConn is a net.Conn whose writes wait in a buffer until uncork sends
// them in one write.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	_, err := c.Conn.Write(c.buf)
	c.buf = nil
	return err
}

// pipeClient is a paho client over a corkConn, collecting the responses
// it gets by correlation data.
type pipeClient struct {
	id   string
	pc   *paho.Client
	conn *corkConn
	mu   sync.Mutex
	got  map[string]*paho.Publish // correlation data -> response
	n    int                      // requests sent
}

func dialPipe(t *testing.T, addr, id string) *pipeClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &pipeClient{id: id, conn: &corkConn{Conn: nc}, got: map[string]*paho.Publish{}}
	c.pc = paho.NewClient(paho.ClientConfig{ClientID: id, Conn: c.conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			c.mu.Lock()
			c.got[string(pr.Packet.Properties.CorrelationData)] = pr.Packet
			c.mu.Unlock()
			return true, nil
		}}})
	if _, err := c.pc.Connect(ctx10(t), &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{ReceiveMaximum: ptr(uint16(1000))}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.pc.Disconnect(&paho.Disconnect{}) })
	return c
}

func ptr[T any](v T) *T { return &v }

// send queues one request (sent at once unless corked) and returns its
// correlation data.
func (c *pipeClient) send(t *testing.T, args ...string) string {
	t.Helper()
	c.n++
	corr := fmt.Appendf(nil, "%-16.16s", fmt.Sprintf("%s/%d", c.id, c.n))
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	exp := uint32(30)
	ts := statestore.HLC{Wall: time.Now().UnixMilli(), Node: c.id}.String()
	_, err := c.pc.PublishWithOptions(ctx10(t), &paho.Publish{Topic: statestore.RequestTopic, QoS: 1, Payload: statestore.AppendRequest(nil, bs...),
		Properties: &paho.PublishProperties{ResponseTopic: "clients/" + c.id + "/services/statestore/_any_/command/invoke/response",
			CorrelationData: corr, MessageExpiry: &exp, User: paho.UserProperties{{Key: "__ts", Value: ts}}}},
		paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
	if err != nil {
		t.Fatal(err)
	}
	return string(corr)
}

// wait returns the responses to corrs, in order, once all came.
func (c *pipeClient) wait(t *testing.T, corrs []string) []*paho.Publish {
	t.Helper()
	out := make([]*paho.Publish, len(corrs))
	testutil.WaitFor(t, 10*time.Second, c.id+"'s responses", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, k := range corrs {
			if out[i] = c.got[k]; out[i] == nil {
				return false
			}
		}
		return true
	})
	return out
}

func bulk(v string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(v), v) }

// TestStateStoreRoundPipelined pipelines SETs on many connections, each
// connection's in one write: every SET is answered +OK with its version,
// every value is there afterwards, and the store wrote the records with
// fewer pwrites than SETs. Then SET, GET, DEL, GET of one key in one
// write: each request sees the ones before it on its connection.
func TestStateStoreRoundPipelined(t *testing.T) {
	e := startEnvWith(t, false, true)
	ctx := ctx10(t)
	check := e.dial(t, "checker")
	testutil.WaitFor(t, 5*time.Second, "the front's route", func() bool {
		_, _, _, err := check.Get(ctx, []byte("warmup"))
		return err == nil
	})
	const conns, sets = 8, 40
	cs := make([]*pipeClient, conns)
	for i := range cs {
		cs[i] = dialPipe(t, e.addr, fmt.Sprintf("pipe%d", i))
	}
	st := e.b.Store()
	before := st.Stats().BehindWrites
	corrs := make([][]string, conns)
	for i, c := range cs {
		c.conn.cork()
		for j := 0; j < sets; j++ {
			corrs[i] = append(corrs[i], c.send(t, "SET", fmt.Sprintf("k%d-%d", i, j), fmt.Sprintf("v%d-%d", i, j)))
		}
	}
	for _, c := range cs {
		if err := c.conn.uncork(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cs {
		for j, p := range c.wait(t, corrs[i]) {
			if string(p.Payload) != "+OK\r\n" || p.Properties.User.Get("__stat") != "200" || p.Properties.User.Get("__ts") == "" {
				t.Fatalf("SET %d of %s: %q %+v", j, c.id, p.Payload, p.Properties.User)
			}
		}
	}
	writes := st.Stats().BehindWrites - before
	t.Logf("%d SETs written with %d pwrites", conns*sets, writes)
	if writes >= conns*sets/2 {
		t.Errorf("%d SETs took %d pwrites: the round's SETs are not written together", conns*sets, writes)
	}
	for i := 0; i < conns; i++ {
		for j := 0; j < sets; j++ {
			k, want := fmt.Sprintf("k%d-%d", i, j), fmt.Sprintf("v%d-%d", i, j)
			if v, _, ok, err := check.Get(ctx, []byte(k)); err != nil || !ok || string(v) != want {
				t.Fatalf("GET %s: %q %v %v, want %q", k, v, ok, err, want)
			}
		}
	}

	// Order within a connection: each request sees the earlier ones.
	for i, c := range cs {
		c.conn.cork()
		k := fmt.Sprintf("order%d", i)
		corrs[i] = []string{
			c.send(t, "SET", k, "one"), c.send(t, "GET", k),
			c.send(t, "SET", k, "two", "NX"), c.send(t, "SET", k, "three"), c.send(t, "GET", k),
			c.send(t, "DEL", k), c.send(t, "GET", k), c.send(t, "SET", k, "four", "NX"),
		}
	}
	for _, c := range cs {
		if err := c.conn.uncork(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"+OK\r\n", bulk("one"), ":-1\r\n", "+OK\r\n", bulk("three"), ":1\r\n", "$-1\r\n", "+OK\r\n"}
	for i, c := range cs {
		for j, p := range c.wait(t, corrs[i]) {
			if string(p.Payload) != want[j] {
				t.Fatalf("%s request %d: %q, want %q", c.id, j, p.Payload, want[j])
			}
		}
		if v, _, ok, err := check.Get(ctx, []byte(fmt.Sprintf("order%d", i))); err != nil || !ok || string(v) != "four" {
			t.Fatalf("order%d: %q %v %v", i, v, ok, err)
		}
	}
}

// TestStateStoreRoundDiskFull fails the pwrite of a round's records with
// ENOSPC: each of the round's SETs is answered with the full-disk answer
// (the quota error, refusal diskFull) and none is applied; the next
// round's SETs succeed.
func TestStateStoreRoundDiskFull(t *testing.T) {
	fs := vfs.NewFaulty(nil)
	e := startEnvStore(t, false, true, func(so *store.Options) { so.FS = fs })
	ctx := ctx10(t)
	check := e.dial(t, "checker")
	testutil.WaitFor(t, 5*time.Second, "the front's route", func() bool {
		_, _, _, err := check.Get(ctx, []byte("warmup"))
		return err == nil
	})
	const conns, sets = 4, 10
	cs := make([]*pipeClient, conns)
	for i := range cs {
		cs[i] = dialPipe(t, e.addr, fmt.Sprintf("full%d", i))
	}
	for round, full := range []bool{true, false} {
		var remove func()
		if full {
			remove = fs.Inject(vfs.Rule{Op: vfs.OpWrite, Path: "commitlog", Err: syscall.ENOSPC})
		}
		corrs := make([][]string, conns)
		for i, c := range cs {
			c.conn.cork()
			for j := 0; j < sets; j++ {
				corrs[i] = append(corrs[i], c.send(t, "SET", fmt.Sprintf("f%d-%d-%d", round, i, j), "v"))
			}
		}
		for _, c := range cs {
			if err := c.conn.uncork(); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cs {
			for j, p := range c.wait(t, corrs[i]) {
				stat, refusal := p.Properties.User.Get("__stat"), p.Properties.User.Get(statestore.PropRefusal)
				if full && (stat != "200" || refusal != statestore.RefusalDiskFull || string(p.Payload) != "-ERR the quota has been exceeded\r\n") ||
					!full && (stat != "200" || string(p.Payload) != "+OK\r\n") {
					t.Fatalf("round %d (disk full %v): SET %d of %s: %s %q", round, full, j, c.id, stat, p.Payload)
				}
			}
		}
		if remove != nil {
			// The store refuses writes until its watcher sees room.
			remove()
			testutil.WaitFor(t, 20*time.Second, "writes resumed", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _, err := check.Set(ctx, []byte("resumed"), []byte("v"), sscli.SetOptions{})
				return err == nil
			})
		}
		for i := 0; i < conns; i++ {
			for j := 0; j < sets; j++ {
				k := fmt.Sprintf("f%d-%d-%d", round, i, j)
				if _, _, ok, err := check.Get(ctx, []byte(k)); err != nil || ok == full {
					t.Fatalf("round %d (disk full %v): GET %s: found %v, %v", round, full, k, ok, err)
				}
			}
		}
	}
	if err := e.ss.Err(); err != nil {
		t.Fatalf("a shard stopped: %v", err)
	}
}
