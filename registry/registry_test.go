package registry

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func startRegistry(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.Addr().String()
}

// testBroker registers with a registry over its own TCP connection, like a
// broker does.
type testBroker struct {
	t       *testing.T
	c       *remoting.Client
	name    string
	addr    string
	id      int64
	cluster string
	version protocol.DataVersion
	topics  map[string]*protocol.TopicConfig
}

func newTestBroker(t *testing.T, name, addr string, id int64, topics ...string) *testBroker {
	t.Helper()
	c, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := &testBroker{t: t, c: c, name: name, addr: addr, id: id, cluster: "DefaultCluster",
		version: protocol.DataVersion{Counter: 1, Timestamp: 1700000000000}, topics: map[string]*protocol.TopicConfig{}}
	for _, tp := range topics {
		b.topics[tp] = &protocol.TopicConfig{TopicName: tp, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG"}
	}
	return b
}

func (b *testBroker) register(registry string) *protocol.Command {
	b.t.Helper()
	resp, err := b.tryRegister(registry)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp
}

// tryRegister is register that returns what went wrong instead of
// failing the test.
func (b *testBroker) tryRegister(registry string) (*protocol.Command, error) {
	body, err := protocol.EncodeJSON(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
		DataVersion: b.version, TopicConfigTable: b.topics}})
	if err != nil {
		return nil, err
	}
	req := protocol.NewRequest(protocol.RegisterBroker, &protocol.RegisterBrokerRequestHeader{
		BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster, HAServerAddr: b.addr + "0", BrokerID: b.id,
		BodyCRC32: bodyCRC32(body)}, body)
	resp, err := b.c.Invoke(context.Background(), registry, req)
	if err != nil {
		return nil, err
	}
	if resp.Code != protocol.Success {
		return nil, fmt.Errorf("register %s: %v", b.addr, resp)
	}
	return resp, nil
}

func call(t *testing.T, c *remoting.Client, addr string, code int32, hdr protocol.HeaderEncoder, body []byte) *protocol.Command {
	t.Helper()
	resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(code, hdr, body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func newCaller(t *testing.T) *remoting.Client {
	t.Helper()
	c, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func route(t *testing.T, c *remoting.Client, addr, topic string) (*protocol.TopicRouteData, *protocol.Command) {
	t.Helper()
	resp := call(t, c, addr, protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil)
	if resp.Code != protocol.Success {
		return nil, resp
	}
	var rd protocol.TopicRouteData
	if err := protocol.DecodeJSON(resp.Body, &rd); err != nil {
		t.Fatal(err)
	}
	return &rd, resp
}

func TestRegistryRegisterAndRoute(t *testing.T) {
	_, reg := startRegistry(t, Options{})
	master := newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "T", "U")
	slave := newTestBroker(t, "broker-a", "10.0.0.2:10911", 1, "T", "U")
	if r := master.register(reg); r.ExtFields["masterAddr"] != "" {
		t.Fatalf("master got masterAddr %v", r.ExtFields)
	}
	r := slave.register(reg)
	if r.ExtFields["masterAddr"] != "10.0.0.1:10911" || r.ExtFields["haServerAddr"] != "10.0.0.1:109110" {
		t.Fatalf("slave response header %v", r.ExtFields)
	}
	c := newCaller(t)
	_, resp := route(t, c, reg, "T")
	want := `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	if string(resp.Body) != want {
		t.Fatalf("route body\n%s\nwant\n%s", resp.Body, want)
	}
	_, resp = route(t, c, reg, "missing")
	if resp.Code != protocol.TopicNotExist || resp.Remark == "" {
		t.Fatalf("missing topic: %v", resp)
	}

	var ci protocol.ClusterInfo
	resp = call(t, c, reg, protocol.GetBrokerClusterInfo, nil, nil)
	if err := protocol.DecodeJSON(resp.Body, &ci); err != nil || len(ci.ClusterAddrTable["DefaultCluster"]) != 1 ||
		ci.BrokerAddrTable["broker-a"].BrokerAddrs[1] != "10.0.0.2:10911" {
		t.Fatalf("cluster info %s %v", resp.Body, err)
	}
	resp = call(t, c, reg, protocol.GetAllTopicListFromNameserver, nil, nil)
	if string(resp.Body) != `{"topicList":["T","U"]}` {
		t.Fatalf("topic list %s", resp.Body)
	}
	resp = call(t, c, reg, protocol.GetTopicsByCluster, &protocol.GetTopicsByClusterRequestHeader{Cluster: "DefaultCluster"}, nil)
	if string(resp.Body) != `{"topicList":["T","U"]}` {
		t.Fatalf("topics by cluster %s", resp.Body)
	}
	resp = call(t, c, reg, protocol.GetTopicsByCluster, &protocol.GetTopicsByClusterRequestHeader{Cluster: "other"}, nil)
	if string(resp.Body) != `{"topicList":[]}` {
		t.Fatalf("topics by other cluster %s", resp.Body)
	}

	// Write permission wipe / add.
	resp = call(t, c, reg, protocol.WipeWritePermOfBroker, &protocol.BrokerPermRequestHeader{BrokerName: "broker-a"}, nil)
	if resp.ExtFields["wipeTopicCount"] != "2" {
		t.Fatalf("wipe %v", resp.ExtFields)
	}
	if rd, _ := route(t, c, reg, "T"); rd.QueueDatas[0].Perm != protocol.PermRead {
		t.Fatalf("perm after wipe %d", rd.QueueDatas[0].Perm)
	}
	resp = call(t, c, reg, protocol.AddWritePermOfBroker, &protocol.BrokerPermRequestHeader{BrokerName: "broker-a"}, nil)
	if resp.ExtFields["addTopicCount"] != "2" {
		t.Fatalf("add %v", resp.ExtFields)
	}
	if rd, _ := route(t, c, reg, "T"); rd.QueueDatas[0].Perm != 6 {
		t.Fatalf("perm after add %d", rd.QueueDatas[0].Perm)
	}

	// Delete a topic; unregister brokers.
	call(t, c, reg, protocol.DeleteTopicInNamesrv, &protocol.DeleteTopicInNamesrvRequestHeader{Topic: "U"}, nil)
	if _, resp := route(t, c, reg, "U"); resp.Code != protocol.TopicNotExist {
		t.Fatalf("deleted topic still routed")
	}
	call(t, c, reg, protocol.UnregisterBroker, &protocol.UnregisterBrokerRequestHeader{BrokerName: "broker-a",
		BrokerAddr: "10.0.0.2:10911", ClusterName: "DefaultCluster", BrokerID: 1}, nil)
	if rd, _ := route(t, c, reg, "T"); len(rd.BrokerDatas[0].BrokerAddrs) != 1 {
		t.Fatalf("slave not unregistered: %v", rd.BrokerDatas[0].BrokerAddrs)
	}
	call(t, c, reg, protocol.UnregisterBroker, &protocol.UnregisterBrokerRequestHeader{BrokerName: "broker-a",
		BrokerAddr: "10.0.0.1:10911", ClusterName: "DefaultCluster", BrokerID: 0}, nil)
	if _, resp := route(t, c, reg, "T"); resp.Code != protocol.TopicNotExist {
		t.Fatalf("topic of unregistered broker still routed")
	}
	resp = call(t, c, reg, protocol.GetBrokerClusterInfo, nil, nil)
	if string(resp.Body) != `{"brokerAddrTable":{},"clusterAddrTable":{}}` {
		t.Fatalf("cluster info after unregister %s", resp.Body)
	}
}

func TestRegistryDataVersion(t *testing.T) {
	_, reg := startRegistry(t, Options{})
	b := newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "T")
	b.register(reg)
	c := newCaller(t)
	// Same version, different topics: ignored.
	b.topics["T"].WriteQueueNums = 8
	b.topics["V"] = &protocol.TopicConfig{TopicName: "V", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	b.register(reg)
	if rd, _ := route(t, c, reg, "T"); rd.QueueDatas[0].WriteQueueNums != 4 {
		t.Fatalf("unchanged version applied topics")
	}
	dvBody, _ := protocol.EncodeJSON(b.version)
	ident := &protocol.QueryDataVersionRequestHeader{BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911", ClusterName: "DefaultCluster"}
	if resp := call(t, c, reg, protocol.QueryDataVersion, ident, dvBody); resp.ExtFields["changed"] != "false" ||
		string(resp.Body) != `{"counter":1,"timestamp":1700000000000}` {
		t.Fatalf("query data version: %v %s", resp.ExtFields, resp.Body)
	}
	// New version: applied, and a topic the master dropped loses its queues.
	b.version.Counter++
	delete(b.topics, "T")
	b.register(reg)
	if _, resp := route(t, c, reg, "T"); resp.Code != protocol.TopicNotExist {
		t.Fatalf("dropped topic still routed")
	}
	if rd, _ := route(t, c, reg, "V"); rd == nil || rd.QueueDatas[0].WriteQueueNums != 1 {
		t.Fatalf("new topic not routed")
	}
	if resp := call(t, c, reg, protocol.QueryDataVersion, ident, dvBody); resp.ExtFields["changed"] != "true" {
		t.Fatalf("old version not reported changed: %v", resp.ExtFields)
	}
	// A slave never changes queue data.
	s := newTestBroker(t, "broker-a", "10.0.0.2:10911", 1, "S")
	s.version.Counter = 99
	s.register(reg)
	if _, resp := route(t, c, reg, "S"); resp.Code != protocol.TopicNotExist {
		t.Fatalf("slave registration created a topic")
	}
	// Bad CRC.
	req := protocol.NewRequest(protocol.RegisterBroker, &protocol.RegisterBrokerRequestHeader{BrokerName: "x", BrokerAddr: "x:1",
		ClusterName: "c", HAServerAddr: "x:2", BodyCRC32: 12345}, []byte(`{}`))
	if resp, err := c.Invoke(context.Background(), reg, req); err != nil || resp.Code != protocol.SystemError || resp.Remark != "crc32 not match" {
		t.Fatalf("bad crc: %v %v", resp, err)
	}
	// Missing header field.
	if resp := call(t, c, reg, protocol.RegisterBroker, &protocol.GetRouteInfoRequestHeader{Topic: "T"}, nil); resp.Code != protocol.SystemError {
		t.Fatalf("bad header accepted: %v", resp)
	}
}

func TestRegistryExpiryAndReRegister(t *testing.T) {
	const expiry = 300 * time.Millisecond
	s, reg := startRegistry(t, Options{ScanInterval: 20 * time.Millisecond, BrokerExpiry: expiry})
	b := newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "T")
	c := newCaller(t)
	// Re-registering every 120 ms keeps it alive past the expiry. The
	// registry judges silence by its own clock: a round in which the
	// time from sending one registration to the answer of the next (or
	// of the route query) reached the expiry, as a loaded machine can
	// make it, proves nothing and is tried again on a new connection.
	errSlow := errors.New("a gap between registrations reached the expiry")
	testutil.Eventually(t, 30*time.Second, func() error {
		sent := time.Now()
		if _, err := b.tryRegister(reg); err != nil {
			return err // the last round's expiry closed the connection
		}
		for i := 0; i < 4; i++ {
			time.Sleep(120 * time.Millisecond)
			next := time.Now()
			_, err := b.tryRegister(reg)
			if time.Since(sent) >= expiry {
				return errSlow
			}
			if err != nil {
				t.Fatalf("registration %d of a live broker: %v", i, err)
			}
			sent = next
		}
		rd, _ := route(t, c, reg, "T")
		if time.Since(sent) >= expiry {
			return errSlow
		}
		if rd == nil {
			t.Fatal("live broker expired")
		}
		return nil
	})
	conn, err := b.c.Conn(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	// Silent: removed with its topic, and its connection closed.
	testutil.WaitFor(t, 10*time.Second, "expiry", func() bool {
		_, resp := route(t, c, reg, "T")
		return resp.Code == protocol.TopicNotExist
	})
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("expired broker's connection not closed")
	}
	if got := s.routes.liveAddrs(); len(got) != 0 {
		t.Fatalf("live table %v", got)
	}
	b.register(reg) // reconnects and comes back
	if rd, _ := route(t, c, reg, "T"); rd == nil || rd.BrokerDatas[0].BrokerAddrs[0] != "10.0.0.1:10911" {
		t.Fatal("re-registered broker not routed")
	}
}

func TestRegistryConnCloseAndAddressReuse(t *testing.T) {
	_, reg := startRegistry(t, Options{})
	c := newCaller(t)
	a := newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "T")
	b := newTestBroker(t, "broker-b", "10.0.0.3:10911", 0, "T")
	a.register(reg)
	b.register(reg)
	if rd, _ := route(t, c, reg, "T"); len(rd.QueueDatas) != 2 || rd.QueueDatas[0].BrokerName != "broker-a" {
		t.Fatalf("two brokers expected: %+v", rd)
	}
	a.c.CloseConn(reg)
	testutil.WaitFor(t, 10*time.Second, "removal on close", func() bool {
		rd, _ := route(t, c, reg, "T")
		return rd != nil && len(rd.QueueDatas) == 1 && rd.QueueDatas[0].BrokerName == "broker-b"
	})

	// A slave address re-registered as master replaces its old id.
	sl := newTestBroker(t, "broker-b", "10.0.0.4:10911", 1, "T")
	sl.register(reg)
	b.c.CloseConn(reg) // master b gone; its slave stays, so does the name
	testutil.WaitFor(t, 10*time.Second, "master removal", func() bool {
		rd, _ := route(t, c, reg, "T")
		return rd != nil && len(rd.BrokerDatas[0].BrokerAddrs) == 1
	})
	sl.id = 0
	sl.version.Counter = 7
	sl.register(reg)
	rd, _ := route(t, c, reg, "T")
	if got := rd.BrokerDatas[0].BrokerAddrs; len(got) != 1 || got[0] != "10.0.0.4:10911" {
		t.Fatalf("address reuse: %v", got)
	}
}

func TestRegistryKVConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "namesrv", "kvConfig.json")
	s, reg := startRegistry(t, Options{KVConfigPath: path})
	c := newCaller(t)
	put := func(ns, k, v string) {
		t.Helper()
		if r := call(t, c, reg, protocol.PutKVConfig, &protocol.KVConfigRequestHeader{Code: protocol.PutKVConfig, Namespace: ns, Key: k, Value: v}, nil); r.Code != 0 {
			t.Fatalf("put: %v", r)
		}
	}
	put(protocol.NamespaceOrderTopicConfig, "T", "broker-a:4")
	put("ns2", "b", "2")
	put("ns2", "a", "1")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"},"ns2":{"a":"1","b":"2"}}}`; string(data) != want {
		t.Fatalf("kv file\n%s\nwant\n%s", data, want)
	}
	r := call(t, c, reg, protocol.GetKVConfig, &protocol.KVConfigRequestHeader{Code: protocol.GetKVConfig, Namespace: "ns2", Key: "a"}, nil)
	if r.Code != 0 || r.ExtFields["value"] != "1" {
		t.Fatalf("get: %v", r)
	}
	r = call(t, c, reg, protocol.GetKVListByNamespace, &protocol.KVConfigRequestHeader{Code: protocol.GetKVListByNamespace, Namespace: "ns2"}, nil)
	if string(r.Body) != `{"table":{"a":"1","b":"2"}}` {
		t.Fatalf("list: %s", r.Body)
	}
	call(t, c, reg, protocol.DeleteKVConfig, &protocol.KVConfigRequestHeader{Code: protocol.DeleteKVConfig, Namespace: "ns2", Key: "a"}, nil)
	r = call(t, c, reg, protocol.GetKVConfig, &protocol.KVConfigRequestHeader{Code: protocol.GetKVConfig, Namespace: "ns2", Key: "a"}, nil)
	if r.Code != protocol.QueryNotFound {
		t.Fatalf("deleted key: %v", r)
	}
	if r := call(t, c, reg, protocol.GetKVListByNamespace, &protocol.KVConfigRequestHeader{Code: protocol.GetKVListByNamespace, Namespace: "none"}, nil); r.Code != protocol.QueryNotFound {
		t.Fatalf("missing namespace: %v", r)
	}
	// Order config reaches brokers and routes.
	b := newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "T")
	if resp := b.register(reg); string(resp.Body) != `{"table":{"T":"broker-a:4"}}` {
		t.Fatalf("register response body %s", resp.Body)
	}
	if rd, _ := route(t, c, reg, "T"); rd.OrderTopicConf != "broker-a:4" {
		t.Fatalf("orderTopicConf %q", rd.OrderTopicConf)
	}
	// Survives a restart.
	s.Close()
	_, reg2 := startRegistry(t, Options{KVConfigPath: path})
	r = call(t, c, reg2, protocol.GetKVConfig, &protocol.KVConfigRequestHeader{Code: protocol.GetKVConfig, Namespace: "ns2", Key: "b"}, nil)
	if r.ExtFields["value"] != "2" {
		t.Fatalf("after restart: %v", r)
	}
	// Cut anywhere, or JSON that is not an object ("null" used to load
	// as no config): refused, naming the file.
	bad := []string{"null", "[]", "0", ""}
	for n := range len(data) {
		bad = append(bad, string(data[:n]))
	}
	for _, b := range bad {
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := New(Options{KVConfigPath: path}); !errors.Is(err, ErrKVConfig) || !strings.Contains(err.Error(), path) {
			t.Fatalf("kv file holding %q: %v", b, err)
		}
	}
}

// FuzzRegistryKVConfig: any bytes in kvConfig.json are refused with
// ErrKVConfig or load, and what loads persists and loads again.
func FuzzRegistryKVConfig(f *testing.F) {
	f.Add([]byte(`{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"},"ns2":{"a":"1","b":"2"}}}`))
	f.Add([]byte(`{"configTable":{"ns":null}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"configTable":{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "kvConfig.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		kv, err := openKV(path)
		if err != nil {
			if !errors.Is(err, ErrKVConfig) {
				t.Fatalf("%q: %v, want ErrKVConfig", data, err)
			}
			return
		}
		kv.mu.Lock()
		err = kv.persistLocked()
		kv.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		again, err := openKV(path)
		if err != nil {
			t.Fatalf("%q loaded, persisted, then refused: %v", data, err)
		}
		if len(again.table) != len(kv.table) {
			t.Fatalf("%q: %d namespaces, %d after a persist", data, len(kv.table), len(again.table))
		}
	})
}

func TestRegistrySideBySideAndConcurrent(t *testing.T) {
	r1, addr1 := startRegistry(t, Options{})
	_, addr2 := startRegistry(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b := newTestBroker(t, fmt.Sprintf("broker-%d", i), fmt.Sprintf("10.0.1.%d:10911", i), 0, "T", fmt.Sprintf("own-%d", i))
			c := newCaller(t)
			for round := 0; round < 10; round++ {
				b.version.Counter = int64(round)
				for _, reg := range []string{addr1, addr2} {
					b.register(reg)
					resp, err := c.Invoke(context.Background(), reg, protocol.NewRequest(protocol.GetRouteInfoByTopic,
						&protocol.GetRouteInfoRequestHeader{Topic: fmt.Sprintf("own-%d", i)}, nil))
					if err != nil || resp.Code != protocol.Success {
						errs <- fmt.Errorf("route own-%d: %v %v", i, resp, err)
						return
					}
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := newCaller(t)
	r1.Close()
	rd, _ := route(t, c, addr2, "T")
	if rd == nil || len(rd.QueueDatas) != 16 || len(rd.BrokerDatas) != 16 {
		t.Fatalf("second registry lost data when the first closed: %+v", rd)
	}
}

func TestRegistryOptions(t *testing.T) {
	d := DefaultOptions()
	if d.Addr != "0.0.0.0:9876" || d.ScanInterval != 10*time.Second || d.BrokerExpiry != 120*time.Second ||
		d.IdleTimeout != 120*time.Second || d.MaxFrameSize != 16<<20 {
		t.Fatalf("defaults %+v", d)
	}
	for _, o := range []Options{{ScanInterval: -1}, {MaxFrameSize: 10}, {ScanInterval: time.Minute, BrokerExpiry: time.Second}} {
		if err := o.Validate(); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v accepted: %v", o, err)
		}
	}
	s, err := New(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // never started
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A GET_ROUTEINFO_BY_TOPIC frame exactly as Java's 4.9.8 client writes it,
// sent over a raw socket, gets a JSON response a Java client accepts.
func TestRegistryJavaClientFrame(t *testing.T) {
	_, reg := startRegistry(t, Options{})
	newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "T").register(reg)
	nc, err := net.Dial("tcp", reg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hdr := `{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}`
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(hdr)))
	frame = append(frame, hdr...)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var lw [8]byte
	if _, err := io.ReadFull(nc, lw[:]); err != nil {
		t.Fatal(err)
	}
	n, word := binary.BigEndian.Uint32(lw[:]), binary.BigEndian.Uint32(lw[4:])
	if word>>24 != 0 {
		t.Fatalf("response serialize type %d, want JSON", word>>24)
	}
	rest := make([]byte, n-4)
	if _, err := io.ReadFull(nc, rest); err != nil {
		t.Fatal(err)
	}
	hl := word & 0xFFFFFF
	wantHdr := `{"code":0,"extFields":{},"flag":1,"language":"GO","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}`
	if string(rest[:hl]) != wantHdr {
		t.Fatalf("response header\n%s\nwant\n%s", rest[:hl], wantHdr)
	}
	if !bytes.Contains(rest[hl:], []byte(`"brokerAddrs":{"0":"10.0.0.1:10911"}`)) {
		t.Fatalf("route body %s", rest[hl:])
	}
}

// The processors are NoRetain, so the connection reuses the receive
// buffers of their requests: what a registration stored must not change
// when later requests land in the same bytes.
func TestRegistryBodiesNotRetained(t *testing.T) {
	_, reg := startRegistry(t, Options{})
	b := newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "TopicA01", "TopicA02")
	b.register(reg)
	// Same version (ignored by the registry), topic names of the same
	// length: their bytes overwrite the first body's if it is reused.
	for i := 0; i < 50; i++ {
		b.topics = map[string]*protocol.TopicConfig{}
		for _, tp := range []string{fmt.Sprintf("TopicZ%02d", i), fmt.Sprintf("TopicY%02d", i)} {
			b.topics[tp] = &protocol.TopicConfig{TopicName: tp, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG"}
		}
		b.register(reg)
		dv, _ := protocol.EncodeJSON(protocol.DataVersion{Counter: 1, Timestamp: 1700000000000 + int64(i)})
		call(t, b.c, reg, protocol.QueryDataVersion, &protocol.QueryDataVersionRequestHeader{
			BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911", ClusterName: "DefaultCluster"}, dv)
	}
	c := newCaller(t)
	resp := call(t, c, reg, protocol.GetAllTopicListFromNameserver, nil, nil)
	if string(resp.Body) != `{"topicList":["TopicA01","TopicA02"]}` {
		t.Fatalf("topics after reused buffers: %s", resp.Body)
	}
	for _, tp := range []string{"TopicA01", "TopicA02"} {
		if rd, _ := route(t, c, reg, tp); rd == nil || rd.QueueDatas[0].WriteQueueNums != 4 {
			t.Fatalf("route of %s lost", tp)
		}
	}
}

// TestRegistryRegisterOnClosedConn: a broker registration the registry
// handles after its connection closed (a broker killed with its
// heartbeat on the way) does not route to the broker; it used to, until
// BrokerExpiry (two minutes).
func TestRegistryRegisterOnClosedConn(t *testing.T) {
	s, reg := startRegistry(t, Options{})
	for i := range 100 {
		b := newTestBroker(t, fmt.Sprint("broker-", i), fmt.Sprintf("10.0.1.%d:10911", i), 0, "T")
		body, err := protocol.EncodeJSON(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
			DataVersion: b.version, TopicConfigTable: b.topics}})
		if err != nil {
			t.Fatal(err)
		}
		frame, err := protocol.EncodeFrame(protocol.NewRequest(protocol.RegisterBroker, &protocol.RegisterBrokerRequestHeader{
			BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster, BrokerID: b.id, BodyCRC32: bodyCRC32(body)}, body))
		if err != nil {
			t.Fatal(err)
		}
		sendAndClose(t, reg, frame)
	}
	testutil.WaitFor(t, 10*time.Second, "no broker of a closed connection routed", func() bool {
		s.routes.mu.RLock()
		defer s.routes.mu.RUnlock()
		return len(s.routes.live) == 0
	})
}
