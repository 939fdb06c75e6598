//go:build cluster

// Real-process metrics test: registry, master, slave and bridge as
// separate processes, each serving /metrics, /healthz and /readyz; load
// through the SDK, an MQTT client and the state store moves the series.

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/client"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testutil"
)

// dialPaho connects a paho.golang MQTT 5 client; onPub receives its
// messages.
func dialPaho(t *testing.T, ctx context.Context, addr, id string, onPub func(*paho.Publish)) *paho.Client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := paho.ClientConfig{ClientID: id, Conn: nc}
	if onPub != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { onPub(pr.Packet); return true, nil }}
	}
	pc := paho.NewClient(cfg)
	if ack, err := pc.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect %s: %v %+v", id, err, ack)
	}
	t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
	return pc
}

// scrape returns every sample of a /metrics page, keyed by its series
// (name and labels as printed).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape %s: bad line %q", addr, line)
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds the samples of a metric name (every label set; for a histogram
// name pass name_count).
func sum(m map[string]float64, name string) (float64, bool) {
	var s float64
	found := false
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s, found = s+v, true
		}
	}
	return s, found
}

func httpGet(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitReady(t *testing.T, name, addr string) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if code, body := httpGet(addr, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("%s not ready: %d %s", name, code, body)
		}
		return nil
	})
}

// TestClusterProcMetrics scrapes each process and checks that the series
// the monitoring guide names exist there and that load moves them.
func TestClusterProcMetrics(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 8)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterAddr, mqttAddr := addr(0), addr(1), addr(3)
	mReg, mMaster, mSlave, mBridge := addr(4), addr(5), addr(6), addr(7)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"),
		"-set", "metrics.listen="+mReg)
	// Health answers while the process starts; readiness waits for it.
	common := []string{"-registries", reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1"}
	master := start(t, dir, "master", append([]string{"broker", "-listen", masterAddr, "-data", filepath.Join(dir, "m"),
		"-set", "metrics.listen=" + mMaster}, common...)...)
	slave := start(t, dir, "slave", append([]string{"broker", "-listen", addr(2), "-data", filepath.Join(dir, "s"),
		"-set", "broker.role=slave", "-set", "broker.id=1", "-set", "metrics.listen=" + mSlave}, common...)...)
	bridge := start(t, dir, "bridge", "bridge", "-listen", mqttAddr, "-registries", reg, "-set", "metrics.listen="+mBridge)
	logsOnFailure(t, rp, master, slave, bridge)
	for name, a := range map[string]string{"registry": mReg, "master": mMaster, "slave": mSlave, "bridge": mBridge} {
		waitReady(t, name, a)
		if code, body := httpGet(a, "/healthz"); code != 200 || body != "ok\n" {
			t.Fatalf("%s /healthz: %d %q", name, code, body)
		}
	}

	series := map[string][]string{
		mReg: {"smartgo_registry_brokers", "smartgo_registry_topics", "smartgo_registry_bridges", "go_goroutines", "process_cpu_seconds_total",
			"process_resident_memory_bytes"},
		mMaster: {"smartgo_broker_send_latency_seconds_count", "smartgo_broker_pull_latency_seconds_count", "smartgo_held_pulls",
			"smartgo_store_flush_latency_seconds_count", "smartgo_store_disk_used_ratio", "smartgo_replication_lag_bytes",
			"smartgo_replication_lag_seconds", "smartgo_replication_slaves", "smartgo_statestore_commands_total",
			"smartgo_statestore_command_latency_seconds_count", "smartgo_statestore_keys", "smartgo_commitlog_max_offset", "smartgo_store_writes_refused", "go_goroutines",
			"process_cpu_seconds_total"},
		mSlave: {"smartgo_replication_lag_bytes", "smartgo_replication_lag_seconds", "smartgo_replication_refused", "smartgo_commitlog_max_offset", "go_goroutines"},
		mBridge: {"smartgo_mqtt_connections", "smartgo_mqtt_sessions", "smartgo_mqtt_subscriptions", "smartgo_mqtt_messages_received_total",
			"smartgo_mqtt_messages_sent_total", "smartgo_mqtt_dropped_qos0_total", "smartgo_mqtt_slow_reader_disconnects_total",
			"smartgo_mqtt_auth_failures_total", "smartgo_bridge_produce_latency_seconds_count", "smartgo_bridge_cluster_sessions",
			"go_goroutines", "process_cpu_seconds_total"},
	}
	// Series that appear once there is something to measure (a slave
	// connected) are polled for; per-topic and per-group series appear
	// with their first message and are checked under load below.
	before := map[string]map[string]float64{}
	deadline := time.Now().Add(30 * time.Second)
	for a, names := range series {
		for {
			m := scrape(t, a)
			var missing []string
			for _, n := range names {
				if _, ok := sum(m, n); !ok {
					missing = append(missing, n)
				}
			}
			if len(missing) == 0 {
				before[a] = m
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s lacks %v", a, missing)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if v, _ := sum(before[mSlave], "smartgo_replication_refused"); v != 0 {
		t.Fatalf("a replicating slave reports a refusal (%v)", v)
	}

	// Load: SDK produce and consume, MQTT publishes at each QoS to a
	// subscriber, state store SETs and GETs.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{reg}}, Group: "mp"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 200 {
		if _, err := p.Send(ctx, &client.Message{Topic: "MetricsLoad", Body: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(pullAll(t, masterAddr, "MetricsLoad", 4)); n < 200 {
		t.Fatalf("pulled %d of 200", n)
	}

	got := make(chan *paho.Publish, 8)
	sub := dialPaho(t, ctx, mqttAddr, "metrics-sub", func(p *paho.Publish) { got <- p })
	if _, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "load/#", QoS: 2}}}); err != nil {
		t.Fatal(err)
	}
	pub := dialPaho(t, ctx, mqttAddr, "metrics-pub", nil)
	for q := byte(0); q <= 2; q++ {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: "load/x", QoS: q, Payload: []byte("hello")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal("subscriber got fewer than 3 messages")
		}
	}

	ss, err := sscli.Dial(ctx, sscli.Options{Addr: mqttAddr, ClientID: "metrics-ss"})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	if _, _, err := ss.Set(ctx, []byte("k"), []byte("v"), sscli.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ss.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}

	moved := map[string][]string{
		mMaster: {"smartgo_broker_send_latency_seconds_count", "smartgo_broker_pull_latency_seconds_count",
			"smartgo_store_flush_latency_seconds_count", "smartgo_statestore_commands_total",
			"smartgo_statestore_command_latency_seconds_count", "smartgo_topic_put_messages_total",
			"smartgo_group_get_messages_total", "smartgo_commitlog_max_offset"},
		mSlave: {"smartgo_commitlog_max_offset"},
		mBridge: {"smartgo_mqtt_messages_received_total", "smartgo_mqtt_messages_sent_total", "smartgo_mqtt_connections",
			"smartgo_mqtt_subscriptions", "smartgo_bridge_produce_latency_seconds_count",
			"smartgo_mqtt_received_bytes_total", "smartgo_mqtt_sent_bytes_total"},
		mReg: {"smartgo_registry_topics", "process_cpu_seconds_total"},
	}
	deadline = time.Now().Add(30 * time.Second)
	for a, names := range moved {
		for {
			now := scrape(t, a)
			var still []string
			for _, n := range names {
				b, _ := sum(before[a], n)
				v, _ := sum(now, n)
				if v <= b {
					still = append(still, fmt.Sprintf("%s (%v -> %v)", n, b, v))
				}
			}
			if len(still) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: under load these did not move: %v", a, still)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Every series the Grafana dashboard queries is served by some
	// process.
	served := map[string]bool{}
	for _, a := range []string{mReg, mMaster, mSlave, mBridge} {
		for k := range scrape(t, a) {
			if i := strings.IndexByte(k, '{'); i >= 0 {
				k = k[:i]
			}
			served[k] = true
		}
	}
	dash, err := os.ReadFile(filepath.Join("..", "..", "conf", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	nameRE := regexp.MustCompile(`\b(smartgo|go|process)_[a-z0-9_]+`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range nameRE.FindAllString(tg.Expr, -1) {
				if !served[n] {
					t.Errorf("dashboard panel %q queries %s, which no process serves", p.Title, n)
				}
			}
		}
	}
	// The slave's state store shards hold a replica of the master's keys
	// and report them: a dashboard sum over shard gauges that does not
	// leave slaves out counts every key once per copy.
	testutil.Eventually(t, 30*time.Second, func() error {
		mk, _ := sum(scrape(t, mMaster), "smartgo_statestore_keys")
		sk, _ := sum(scrape(t, mSlave), "smartgo_statestore_keys")
		if mk < 1 || sk != mk {
			return fmt.Errorf("state store keys: master %v, slave %v", mk, sk)
		}
		return nil
	})
	shardRE := regexp.MustCompile(`sum[^(]*\((smartgo_statestore_(keys|bytes|expiring_keys|history_changes)|smartgo_twin_[a-z_]+)\b`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if shardRE.MatchString(tg.Expr) && !strings.Contains(tg.Expr, `smartgo_broker_info{role!="SLAVE"}`) {
				t.Errorf("dashboard panel %q sums shard gauges over slaves too (each key counted per copy): %s", p.Title, tg.Expr)
			}
		}
	}

	// The bridge node registered with the registry (it is ready).
	if n, _ := sum(scrape(t, mReg), "smartgo_registry_bridges"); n != 1 {
		t.Errorf("smartgo_registry_bridges = %v, want 1", n)
	}
	// Each QoS moved on the bridge.
	m := scrape(t, mBridge)
	for q := 0; q <= 2; q++ {
		k := fmt.Sprintf(`smartgo_mqtt_messages_received_total{qos="%d"}`, q)
		if m[k] < 1 {
			t.Errorf("%s = %v", k, m[k])
		}
	}
}

// TestClusterProcControllerHealth: a controller process serves the same
// monitoring endpoints: /healthz at once, /readyz once it knows its Raft
// leader (a single replica elects itself), /metrics with the Go runtime
// and process series.
func TestClusterProcControllerHealth(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 3)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	ctl, mon := addr(0), addr(2)
	p := start(t, dir, "controller", "controller", "-listen", ctl, "-data", filepath.Join(dir, "c"),
		"-peers", ctl+"="+addr(1), "-set", "controller.raft_listen="+addr(1), "-set", "controller.election_timeout=500ms",
		"-set", "metrics.listen="+mon)
	logsOnFailure(t, p)
	waitReady(t, "controller", mon)
	if code, body := httpGet(mon, "/readyz"); code != 200 || !strings.Contains(body, "ok controller") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if code, body := httpGet(mon, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	m := scrape(t, mon)
	for _, n := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes", "smartgo_controller_raft_term"} {
		if _, ok := sum(m, n); !ok {
			t.Errorf("controller /metrics lacks %s", n)
		}
	}
	if v, ok := sum(m, "smartgo_controller_leader_known"); !ok || v != 1 {
		t.Errorf("controller /metrics: smartgo_controller_leader_known %v %v", v, ok)
	}
}
