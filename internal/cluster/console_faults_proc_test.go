//go:build cluster

// The console while part of the cluster is down: a master killed (its
// slave keeps copies of its topics, groups and offsets) and another
// broker group hung (SIGSTOP), all separate processes.

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/console"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
)

// openConsole returns a user of the open console at addr (no login) and
// an admin client of the cluster of registry reg.
func openConsole(t *testing.T, addr, reg string) (*consoleUser, *admin.Admin) {
	t.Helper()
	adm, err := admin.New(admin.Options{Registries: []string{reg}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	return &consoleUser{t: t, base: "http://" + addr, hc: &http.Client{Timeout: 20 * time.Second}}, adm
}

// pause stops p (SIGSTOP) and waits until every thread of it is stopped,
// so that nothing it already received is still answered.
func (p *proc) pause(t *testing.T) {
	t.Helper()
	testutil.StopProcess(t, p.cmd.Process)
}

// TestClusterProcConsoleBrokerDown: after broker-a's master dies, the
// topics and groups pages still list its topic and group (read from its
// slave), the group's page shows its progress instead of "no such
// group", its messages are found by key and by offset and its state
// store keys in the slave's replica; while broker-b is hung, those pages
// answer with what broker-a returned and name broker-b in
// console.PartialHeader, within the console's request timeout, instead of
// failing whole.
func TestClusterProcConsoleBrokerDown(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 6)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, slaveA, masterB, consoleAddr, mqttAddr := addr(0), addr(1), addr(2), addr(3), addr(4), addr(5)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	common := []string{"-registries", reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1",
		"-set", "broker.slave_sync_interval=200ms"}
	ma := start(t, dir, "master-a", append([]string{"broker", "-listen", masterA, "-data", filepath.Join(dir, "ma")}, common...)...)
	sa := start(t, dir, "slave-a", append([]string{"broker", "-listen", slaveA, "-data", filepath.Join(dir, "sa"),
		"-set", "broker.role=slave", "-set", "broker.id=1"}, common...)...)
	// broker-b is alone in its cluster: topics made in DefaultCluster
	// live on broker-a only.
	mb := start(t, dir, "master-b", append([]string{"broker", "-listen", masterB, "-data", filepath.Join(dir, "mb"),
		"-set", "broker.name=broker-b", "-set", "broker.cluster=OtherCluster"}, common...)...)
	t.Cleanup(func() { _ = mb.cmd.Process.Signal(syscall.SIGCONT) })
	con := start(t, dir, "console", "console", "-listen", consoleAddr, "-registries", reg, "-set", "console.request_timeout=3s")
	br := start(t, dir, "bridge", "bridge", "-listen", mqttAddr, "-registries", reg)
	logsOnFailure(t, rp, ma, sa, mb, con, br)
	u, adm := openConsole(t, consoleAddr, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, group = "DownT", "DownG"
	testutil.Eventually(t, 60*time.Second, func() error {
		return adm.CreateTopic(ctx, "DefaultCluster", admin.TopicConfig{Name: topic, ReadQueues: 2, WriteQueues: 2})
	})
	copts := client.ClientOptions{Registries: []string{reg}}
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: copts, Group: "down-p"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 20 {
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Keys: []string{fmt.Sprint("k", i)}, Body: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: copts, Group: group, From: client.ConsumeFromFirst},
		func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The slave has copied the group's offsets: all 20 consumed.
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	testutil.Eventually(t, 60*time.Second, func() error {
		consumed, err := groupOffsets(rc, slaveA, group, topic, 2)
		if err != nil {
			return err
		}
		if consumed != 20 {
			return fmt.Errorf("slave has %d of 20 consumed", consumed)
		}
		return nil
	})
	pc.Close()
	// State store keys, on the shards of both broker groups.
	ss, err := sscli.Dial(ctx, sscli.Options{Addr: mqttAddr, ClientID: "down-ss"})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	for i := range 20 {
		if _, _, err := ss.Set(ctx, []byte(fmt.Sprint("key", i)), []byte("v"), sscli.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ssKeys := func() (int, string, error) {
		resp, err := u.hc.Get(u.base + "/api/statestore/keys?limit=100")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		var p admin.StateStoreKeyPage
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusOK {
			return 0, "", fmt.Errorf("state store keys: %d %v", resp.StatusCode, err)
		}
		return len(p.Keys), resp.Header.Get(console.PartialHeader), nil
	}
	if n, _, err := ssKeys(); err != nil || n != 20 {
		t.Fatalf("state store keys: %d %v", n, err)
	}

	type topicRow struct {
		Name    string                `json:"name"`
		Brokers []admin.TopicOnBroker `json:"brokers"`
	}
	type groupRow struct {
		Name    string   `json:"name"`
		Brokers []string `json:"brokers"`
		Err     string   `json:"error"`
	}
	hasTopic := func(rows []topicRow) bool {
		for _, r := range rows {
			if r.Name == topic && len(r.Brokers) == 1 && r.Brokers[0].Broker == "broker-a" {
				return true
			}
		}
		return false
	}
	hasGroup := func(rows []groupRow) bool {
		for _, r := range rows {
			if r.Name == group && len(r.Brokers) == 1 && r.Brokers[0] == "broker-a" {
				return true
			}
		}
		return false
	}

	ma.kill()
	// Once the registry routes broker-a to its slave alone, the pages
	// read broker-a there.
	testutil.Eventually(t, 60*time.Second, func() error {
		rd, err := adm.TopicRoute(ctx, topic)
		if err != nil {
			return err
		}
		if len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].MasterAddr() != "" {
			return fmt.Errorf("route still has a master: %+v", rd.BrokerDatas[0])
		}
		return nil
	})
	var topics []topicRow
	if err := u.get("/api/topics", &topics); err != nil || !hasTopic(topics) {
		t.Fatalf("master dead: topics page lacks %s on broker-a (%v): %+v", topic, err, topics)
	}
	var groups []groupRow
	if err := u.get("/api/groups", &groups); err != nil || !hasGroup(groups) {
		t.Fatalf("master dead: groups page lacks %s on broker-a (%v): %+v", group, err, groups)
	}
	var g struct {
		Queues   []admin.QueueProgress `json:"queues"`
		TotalLag int64                 `json:"totalLag"`
	}
	if err := u.get("/api/groups/"+group+"?topic="+topic, &g); err != nil || len(g.Queues) != 2 || g.TotalLag != 0 {
		t.Fatalf("master dead: group page: %v %+v", err, g)
	}
	var stats []admin.QueueStat
	if err := u.get("/api/topics/"+topic+"/stats", &stats); err != nil || len(stats) != 2 || stats[0].MaxOffset+stats[1].MaxOffset != 20 {
		t.Fatalf("master dead: topic stats: %v %+v", err, stats)
	}
	// Its state store keys are read from its slave's replica.
	testutil.Eventually(t, 30*time.Second, func() error {
		if n, _, err := ssKeys(); err != nil || n != 20 {
			return fmt.Errorf("master dead: %d state store keys of 20 (%v)", n, err)
		}
		return nil
	})
	// Its messages are still found, by key and by queue offset.
	var byKey []struct{ Body []byte }
	if err := u.get("/api/messages/by-key?topic="+topic+"&key=k7", &byKey); err != nil || len(byKey) != 1 || string(byKey[0].Body) != "m7" {
		t.Fatalf("master dead: message by key: %v %+v", err, byKey)
	}
	var browse struct {
		Messages []struct{ Body []byte }
	}
	if err := u.get("/api/messages/browse?topic="+topic+"&broker=broker-a&queue=0&offset=0&count=32", &browse); err != nil || len(browse.Messages) == 0 {
		t.Fatalf("master dead: browse: %v %+v", err, browse)
	}

	// broker-b hangs: the pages answer with broker-a's part and say
	// broker-b did not answer.
	mb.pause(t)
	for _, path := range []string{"/api/topics", "/api/groups"} {
		began := time.Now()
		resp, err := u.hc.Get(u.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		took := time.Since(began)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("broker-b hung: %s: status %d", path, resp.StatusCode)
		}
		if h := resp.Header.Get(console.PartialHeader); !strings.Contains(h, masterB) {
			t.Errorf("broker-b hung: %s: %s %q does not name %s", path, console.PartialHeader, h, masterB)
		}
		if took > 6*time.Second {
			t.Errorf("broker-b hung: %s took %v (request timeout 3 s)", path, took)
		}
	}
	if err := u.get("/api/topics", &topics); err != nil || !hasTopic(topics) {
		t.Fatalf("broker-b hung: topics page lacks %s (%v): %+v", topic, err, topics)
	}
	if err := u.get("/api/groups", &groups); err != nil || !hasGroup(groups) {
		t.Fatalf("broker-b hung: groups page lacks %s (%v): %+v", group, err, groups)
	}
	if n, h, err := ssKeys(); err != nil || n == 0 || !strings.Contains(h, masterB) {
		t.Fatalf("broker-b hung: state store keys: %d %q %v", n, h, err)
	}
}

// chartConsole starts a console process at addr that samples the cluster
// of registry reg every second (request timeout 3 s), logs it and ps on
// failure, and returns its user and an admin client.
func chartConsole(t *testing.T, dir, addr, reg string, ps ...*proc) (*consoleUser, *admin.Admin) {
	t.Helper()
	con := start(t, dir, "console", "console", "-listen", addr, "-registries", reg, "-set", "console.sample_interval=1s",
		"-set", "console.request_timeout=3s")
	logsOnFailure(t, append(ps, con)...)
	return openConsole(t, addr, reg)
}

// TestClusterProcConsoleChartsBrokerHung: a broker that misses a few of
// the console's sampling rounds (hung) does not show, when it answers
// again, all its stored messages as a burst on the message rate chart:
// nothing was sent while it was stopped, and the chart stays near zero.
func TestClusterProcConsoleChartsBrokerHung(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 4)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, masterB, consoleAddr := addr(0), addr(1), addr(2), addr(3)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	common := []string{"-registries", reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1"}
	ma := start(t, dir, "master-a", append([]string{"broker", "-listen", masterA, "-data", filepath.Join(dir, "ma")}, common...)...)
	mb := start(t, dir, "master-b", append([]string{"broker", "-listen", masterB, "-data", filepath.Join(dir, "mb"),
		"-set", "broker.name=broker-b", "-set", "broker.cluster=OtherCluster"}, common...)...)
	t.Cleanup(func() { _ = mb.cmd.Process.Signal(syscall.SIGCONT) })
	u, adm := chartConsole(t, dir, consoleAddr, reg, rp, ma, mb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, cl := range []string{"DefaultCluster", "OtherCluster"} {
		testutil.Eventually(t, 60*time.Second, func() error {
			return adm.CreateTopic(ctx, cl, admin.TopicConfig{Name: "Chart" + cl, ReadQueues: 2, WriteQueues: 2})
		})
	}
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{reg}}, Group: "chart-p"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A few messages on broker-a, many on broker-b.
	const sent = 3000
	for i := range sent + 10 {
		topic := "ChartOtherCluster"
		if i >= sent {
			topic = "ChartDefaultCluster"
		}
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	type series struct {
		Series map[string][]struct {
			T int64
			V float64
		} `json:"series"`
	}
	// points returns the total:put points after since (Unix ms).
	points := func(since int64) []struct {
		T int64
		V float64
	} {
		var s series
		if err := u.get("/api/series?names=total:put&since="+strconv.FormatInt(since, 10), &s); err != nil {
			t.Fatal(err)
		}
		return s.Series["total:put"]
	}
	waitPoints := func(what string, since int64, n int) {
		testutil.Eventually(t, 30*time.Second, func() error {
			if got := len(points(since)); got < n {
				return fmt.Errorf("%s: %d chart points, want %d", what, got, n)
			}
			return nil
		})
	}
	// The chart has measured broker-b's messages; then broker-b stops
	// for a few rounds and continues.
	waitPoints("after the sends", time.Now().UnixMilli(), 2)
	stopAt := time.Now().UnixMilli()
	mb.pause(t)
	waitPoints("broker-b stopped", stopAt, 3)
	contAt := time.Now().UnixMilli()
	if err := mb.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitPoints("broker-b continued", contAt, 3)
	for _, pt := range points(stopAt) {
		if pt.V > sent/10 {
			t.Fatalf("nothing sent since broker-b stopped, yet the chart shows %.0f msgs/s at %s (all: %+v)",
				pt.V, time.UnixMilli(pt.T).Format(time.RFC3339Nano), points(stopAt))
		}
	}
}

// TestClusterProcConsoleClusterPageHung: with one of two registries and a
// whole broker group hung (SIGSTOP), the cluster page answers within the
// console's request timeout and still shows the other registry, the
// other broker group and the bridge node, with an error on each part that
// did not answer.
func TestClusterProcConsoleClusterPageHung(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 8)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg1, reg2, masterA, masterB, slaveB, mqttAddr, consoleAddr := addr(0), addr(1), addr(2), addr(3), addr(4), addr(5), addr(6)
	regs := reg1 + "," + reg2
	r1 := start(t, dir, "registry-1", "registry", "-set", "registry.listen="+reg1, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv1.json"))
	r2 := start(t, dir, "registry-2", "registry", "-set", "registry.listen="+reg2, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv2.json"))
	common := []string{"-registries", regs, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1"}
	ma := start(t, dir, "master-a", append([]string{"broker", "-listen", masterA, "-data", filepath.Join(dir, "ma")}, common...)...)
	mb := start(t, dir, "master-b", append([]string{"broker", "-listen", masterB, "-data", filepath.Join(dir, "mb"),
		"-set", "broker.name=broker-b"}, common...)...)
	sb := start(t, dir, "slave-b", append([]string{"broker", "-listen", slaveB, "-data", filepath.Join(dir, "sb"),
		"-set", "broker.name=broker-b", "-set", "broker.role=slave", "-set", "broker.id=1"}, common...)...)
	for _, p := range []*proc{r1, mb, sb} {
		t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
	}
	br := start(t, dir, "bridge", "bridge", "-listen", mqttAddr, "-registries", regs, "-set", "bridge.heartbeat_interval=1s")
	con := start(t, dir, "console", "console", "-listen", consoleAddr, "-registries", regs, "-set", "console.request_timeout=3s")
	logsOnFailure(t, r1, r2, ma, mb, sb, br, con)
	u, adm2 := openConsole(t, consoleAddr, reg2)
	testutil.Eventually(t, 60*time.Second, func() error {
		var cl consoleCluster
		if err := u.get("/api/cluster", &cl); err != nil {
			return err
		}
		if len(cl.Brokers) != 3 || len(cl.Bridges) != 1 || len(cl.Errors) != 0 {
			return fmt.Errorf("cluster not up yet: %+v", cl)
		}
		// The console may have answered from registry 1 alone, which
		// is paused below: registry 2 must know every broker too (a
		// broker that started before it registers there on its retry).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := adm2.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		n := 0
		for _, bd := range info.BrokerAddrTable {
			n += len(bd.BrokerAddrs)
		}
		if n != 3 {
			return fmt.Errorf("registry 2 knows %d brokers: %+v", n, info.BrokerAddrTable)
		}
		return nil
	})

	for _, p := range []*proc{r1, mb, sb} {
		p.pause(t)
	}
	// A console that waited for the hung parts would be slow on every
	// call; a loaded machine can stall one call past the bound, so the
	// fastest of up to three calls is the one that must keep it.
	var cl consoleCluster
	var took []time.Duration
	for range 3 {
		began := time.Now()
		cl = consoleCluster{}
		if err := u.get("/api/cluster", &cl); err != nil {
			t.Fatal(err)
		}
		if took = append(took, time.Since(began)); took[len(took)-1] <= 3500*time.Millisecond {
			break
		}
	}
	if slices.Min(took) > 3500*time.Millisecond {
		t.Errorf("cluster page took %v (request timeout 3 s)", took)
	}
	if len(cl.Registries) != 2 || cl.Registries[0].OK || cl.Registries[0].Err == "" || !cl.Registries[1].OK {
		t.Errorf("registries: %+v", cl.Registries)
	}
	if len(cl.Bridges) != 1 || len(cl.Errors) != 0 {
		t.Errorf("bridges %+v, errors %q", cl.Bridges, cl.Errors)
	}
	for _, a := range []string{masterA, masterB, slaveB} {
		m, err := cl.member(a)
		if err != nil {
			t.Fatal(err)
		}
		if hung := a != masterA; hung != (m.Err != "") || (!hung && m.Role != "ASYNC_MASTER") {
			t.Errorf("broker %s: %+v", a, m)
		}
	}
}

// TestClusterProcConsoleMQTTNodeHung: with one of two bridge nodes hung
// (SIGSTOP, still registered), the MQTT page lists the other node's
// clients and names the hung node in console.PartialHeader, and the
// sessions list, which every node holds, comes from the node that
// answers, instead of both failing whole.
func TestClusterProcConsoleMQTTNodeHung(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 5)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, mqtt1, mqtt2, consoleAddr := addr(0), addr(1), addr(2), addr(3), addr(4)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	ma := start(t, dir, "master", "broker", "-listen", masterA, "-data", filepath.Join(dir, "m"), "-registries", reg,
		"-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1")
	bridges := map[string]*proc{}
	for i, a := range []string{mqtt1, mqtt2} {
		bridges[a] = start(t, dir, fmt.Sprint("bridge-", i+1), "bridge", "-listen", a, "-registries", reg, "-set", "bridge.heartbeat_interval=1s")
		t.Cleanup(func() { _ = bridges[a].cmd.Process.Signal(syscall.SIGCONT) })
	}
	con := start(t, dir, "console", "console", "-listen", consoleAddr, "-registries", reg, "-set", "console.request_timeout=3s")
	logsOnFailure(t, rp, ma, bridges[mqtt1], bridges[mqtt2], con)
	u, _ := openConsole(t, consoleAddr, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var nodes []admin.BridgeNode
	testutil.Eventually(t, 60*time.Second, func() error {
		nodes = nil
		if err := u.get("/api/mqtt/nodes", &nodes); err != nil {
			return err
		}
		if len(nodes) != 2 {
			return fmt.Errorf("%d bridge nodes registered", len(nodes))
		}
		return nil
	})
	// A client on each node; the node listed first (the one asked first
	// for the sessions) hangs.
	first := nodes[0].Addrs[0]
	other := mqtt1
	if first == mqtt1 {
		other = mqtt2
	}
	dialPaho(t, ctx, first, "on-hung", nil)
	dialPaho(t, ctx, other, "on-live", nil)
	testutil.Eventually(t, 30*time.Second, func() error {
		var p admin.MQTTClientPage
		if err := u.get("/api/mqtt/clients", &p); err != nil {
			return err
		}
		if len(p.Items) != 2 {
			return fmt.Errorf("clients %+v", p.Items)
		}
		return nil
	})
	bridges[first].pause(t)

	resp, err := u.hc.Get(u.base + "/api/mqtt/clients")
	if err != nil {
		t.Fatal(err)
	}
	var p admin.MQTTClientPage
	err = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || len(p.Items) != 1 || p.Items[0].ClientID != "on-live" {
		t.Fatalf("one node hung: clients: %d %v %+v", resp.StatusCode, err, p.Items)
	}
	if h := resp.Header.Get(console.PartialHeader); !strings.Contains(h, nodes[0].Node) {
		t.Errorf("one node hung: %s %q does not name %s", console.PartialHeader, h, nodes[0].Node)
	}
	var sessions struct {
		Items []struct {
			ClientID string `json:"clientId"`
		} `json:"items"`
	}
	if err := u.get("/api/mqtt/sessions", &sessions); err != nil {
		t.Fatalf("one node hung: sessions: %v", err)
	}
}

// TestClusterProcConsoleChartsBridgeHung: the MQTT message rate chart of
// a bridge node that hangs (SIGSTOP; the registry keeps listing it until
// it expires) falls to zero within a few of its heartbeat intervals: its
// last rate used to stand until the node was forgotten, minutes later.
func TestClusterProcConsoleChartsBridgeHung(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 4)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, mqttAddr, consoleAddr := addr(0), addr(1), addr(2), addr(3)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	ma := start(t, dir, "master", "broker", "-listen", masterA, "-data", filepath.Join(dir, "m"), "-registries", reg,
		"-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1")
	br := start(t, dir, "bridge", "bridge", "-listen", mqttAddr, "-registries", reg, "-set", "bridge.heartbeat_interval=1s")
	t.Cleanup(func() { _ = br.cmd.Process.Signal(syscall.SIGCONT) })
	u, _ := chartConsole(t, dir, consoleAddr, reg, rp, ma, br)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testutil.Eventually(t, 60*time.Second, func() error {
		var nodes []admin.BridgeNode
		if err := u.get("/api/mqtt/nodes", &nodes); err != nil || len(nodes) != 1 {
			return fmt.Errorf("bridge nodes %v %v", nodes, err)
		}
		return nil
	})
	type pt struct {
		T int64
		V float64
	}
	in := func(since int64) []pt {
		var s struct {
			Series map[string][]pt `json:"series"`
		}
		if err := u.get("/api/series?names=mqtt:in&since="+strconv.FormatInt(since, 10), &s); err != nil {
			t.Fatal(err)
		}
		return s.Series["mqtt:in"]
	}
	// A publisher at about 200 messages a second until the node hangs.
	pub := dialPaho(t, ctx, mqttAddr, "chart-pub", nil)
	pubCtx, stopPub := context.WithCancel(ctx)
	defer stopPub()
	go func() {
		for pubCtx.Err() == nil {
			_, _ = pub.Publish(pubCtx, &paho.Publish{Topic: "chart/x", QoS: 0, Payload: []byte("x")})
			time.Sleep(5 * time.Millisecond)
		}
	}()
	testutil.Eventually(t, 30*time.Second, func() error {
		pts := in(0)
		if len(pts) == 0 || pts[len(pts)-1].V < 20 {
			return fmt.Errorf("mqtt:in not moving yet: %+v", pts)
		}
		return nil
	})
	br.pause(t)
	stopPub()
	// After three of its 1 s heartbeats (and a sampling round), its rate
	// no longer counts.
	quietFrom := time.Now().Add(5 * time.Second).UnixMilli()
	testutil.Eventually(t, 30*time.Second, func() error {
		if pts := in(quietFrom); len(pts) < 3 {
			return fmt.Errorf("%d points since the node went quiet", len(pts))
		}
		return nil
	})
	for _, p := range in(quietFrom) {
		if p.V != 0 {
			t.Fatalf("bridge node hung for seconds, yet the chart shows %.0f msgs/s in at %s (all: %+v)",
				p.V, time.UnixMilli(p.T).Format(time.RFC3339Nano), in(quietFrom))
		}
	}
}
