//go:build cluster

// The console while part of the cluster is down: a master killed (its
// slave keeps copies of its topics, groups and offsets) and another
// broker group hung (SIGSTOP), all separate processes.

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/console"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
)

// TestClusterProcConsoleBrokerDown: after broker-a's master dies, the
// topics and groups pages still list its topic and group (read from its
// slave) and the group's page shows its progress instead of "no such
// group"; while broker-b is hung, those pages answer with what broker-a
// returned and name broker-b in console.PartialHeader, within the
// console's request timeout, instead of failing whole.
func TestClusterProcConsoleBrokerDown(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 5)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, slaveA, masterB, consoleAddr := addr(0), addr(1), addr(2), addr(3), addr(4)
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
	logsOnFailure(t, rp, ma, sa, mb, con)
	u := &consoleUser{t: t, base: "http://" + consoleAddr, hc: &http.Client{Timeout: 20 * time.Second}}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, err := admin.New(admin.Options{Registries: []string{reg}})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
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
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(fmt.Sprint("m", i))}); err != nil {
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

	// broker-b hangs: the pages answer with broker-a's part and say
	// broker-b did not answer.
	if err := mb.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
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
}
