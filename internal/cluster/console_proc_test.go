//go:build cluster

// The console's JSON API against a cluster of separate processes: a
// registry, a master and its slave, a bridge node and a `smartgo console`
// process, all talking over 127.0.0.1.

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// consoleUser is a logged-in user of a console: its cookie jar and CSRF
// token.
type consoleUser struct {
	t    *testing.T
	base string
	hc   *http.Client
	csrf string
}

func consoleLogin(t *testing.T, addr, user, pass string) *consoleUser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	u := &consoleUser{t: t, base: "http://" + addr, hc: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
	testutil.Eventually(t, 30*time.Second, func() error {
		var m struct{ CSRF string }
		code, err := u.call("POST", "/api/login", map[string]string{"user": user, "password": pass}, &m)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("login %s: %d %v", user, code, err)
		}
		u.csrf = m.CSRF
		return nil
	})
	return u
}

// call sends a JSON request (body nil for none) with the CSRF token and
// decodes a 200 answer into out (if not nil).
func (u *consoleUser) call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if u.csrf != "" {
		req.Header.Set("X-CSRF-Token", u.csrf)
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, nil
}

// get is call for a GET that must answer 200.
func (u *consoleUser) get(path string, out any) error {
	code, err := u.call("GET", path, nil, out)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", path, code)
	}
	return err
}

type consoleCluster struct {
	Registries []admin.RegistryState `json:"registries"`
	Brokers    []admin.Member        `json:"brokers"`
	Bridges    []admin.BridgeNode    `json:"bridges"`
	Errors     []string              `json:"errors"`
}

// member returns the broker of the cluster page at addr.
func (c *consoleCluster) member(addr string) (admin.Member, error) {
	for _, m := range c.Brokers {
		if m.Addr == addr {
			return m, nil
		}
	}
	return admin.Member{}, fmt.Errorf("no broker at %s in %+v", addr, c.Brokers)
}

// logsOnFailure logs the tail of each process's log when the test fails.
func logsOnFailure(t *testing.T, ps ...*proc) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range ps {
				data, _ := os.ReadFile(p.log)
				t.Logf("%s:\n%s", p.log, tailLines(string(data), 40))
			}
		}
	})
}

// TestClusterProcConsole: the console process shows the cluster as its
// processes are: the master and the slave with their roles, versions,
// uptime, disk use and offsets, the replication lag while the slave is
// stopped (SIGSTOP) and its recovery, the bridge node's connection count;
// it creates a topic the registry then routes, finds a message by key,
// shows a consumer group without lag, and disconnects an MQTT client.
func TestClusterProcConsole(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 6)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterAddr, slaveAddr, mqttAddr, consoleAddr, mMaster := addr(0), addr(1), addr(2), addr(3), addr(4), addr(5)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	common := []string{"-registries", reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1"}
	master := start(t, dir, "master", append([]string{"broker", "-listen", masterAddr, "-data", filepath.Join(dir, "m"),
		"-set", "metrics.listen=" + mMaster}, common...)...)
	slave := start(t, dir, "slave", append([]string{"broker", "-listen", slaveAddr, "-data", filepath.Join(dir, "s"),
		"-set", "broker.role=slave", "-set", "broker.id=1"}, common...)...)
	t.Cleanup(func() { _ = slave.cmd.Process.Signal(syscall.SIGCONT) })
	bridge := start(t, dir, "bridge", "bridge", "-listen", mqttAddr, "-registries", reg, "-set", "bridge.heartbeat_interval=1s")
	creds := filepath.Join(dir, "console.passwd")
	for _, u := range []string{"alice", "bob"} {
		if out, err := exec.Command(smartgoBin(t), "passwd", "-f", creds, "-u", u, "-p", u+"-pw").CombinedOutput(); err != nil {
			t.Fatalf("passwd %s: %v %s", u, err, out)
		}
	}
	console := start(t, dir, "console", "console", "-listen", consoleAddr, "-registries", reg, "-set", "console.credentials_file="+creds,
		"-set", "console.admin_users=alice", "-set", "console.sample_interval=1s", "-set", "console.request_timeout=2s")
	logsOnFailure(t, rp, master, slave, bridge, console)
	alice, bob := consoleLogin(t, consoleAddr, "alice", "alice-pw"), consoleLogin(t, consoleAddr, "bob", "bob-pw")
	waitReady(t, "master", mMaster)

	var cl consoleCluster
	testutil.Eventually(t, 60*time.Second, func() error {
		cl = consoleCluster{}
		if err := bob.get("/api/cluster", &cl); err != nil {
			return err
		}
		if len(cl.Registries) != 1 || !cl.Registries[0].OK || cl.Registries[0].Addr != reg {
			return fmt.Errorf("registries %+v", cl.Registries)
		}
		m, err := cl.member(masterAddr)
		if err != nil {
			return err
		}
		s, err := cl.member(slaveAddr)
		if err != nil {
			return err
		}
		if m.Role != "ASYNC_MASTER" || s.Role != "SLAVE" || m.ID != 0 || s.ID != 1 || m.Name != s.Name {
			return fmt.Errorf("roles: master %+v slave %+v", m, s)
		}
		for _, b := range []admin.Member{m, s} {
			if b.Version == "" || b.BootTime <= 0 || b.DiskRatio <= 0 || b.DiskRatio > 1 || b.Err != "" {
				return fmt.Errorf("broker %s: %+v", b.Addr, b)
			}
		}
		if m.LagBytes != 0 || s.LagBytes != 0 {
			return fmt.Errorf("replication not caught up: master %d slave %d", m.LagBytes, s.LagBytes)
		}
		if len(cl.Bridges) != 1 || len(cl.Bridges[0].Addrs) == 0 || cl.Bridges[0].Addrs[0] != mqttAddr {
			return fmt.Errorf("bridges %+v", cl.Bridges)
		}
		return nil
	})

	// A topic made through the console is routed by the registry.
	const topic = "ConsoleClusterT"
	tb := map[string]any{"name": topic, "readQueues": 4, "writeQueues": 4, "perm": 6}
	if code, err := bob.call("POST", "/api/topics", tb, nil); err != nil || code != http.StatusForbidden {
		t.Fatalf("read-only user creates a topic: %d %v", code, err)
	}
	if code, err := alice.call("POST", "/api/topics", tb, nil); err != nil || code != http.StatusOK {
		t.Fatalf("create topic: %d %v", code, err)
	}
	// A broker's refusal (NO_PERMISSION: a system topic) is 403, not the
	// 502 of a broker that failed to answer.
	if code, err := alice.call("DELETE", "/api/topics/TBW102", nil, nil); err != nil || code != http.StatusForbidden {
		t.Errorf("delete TBW102: %d %v, want 403 with the broker's refusal", code, err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		var route struct {
			Brokers []struct {
				Addrs map[string]string `json:"brokerAddrs"`
			} `json:"brokerDatas"`
		}
		if err := bob.get("/api/topics/"+topic+"/route", &route); err != nil {
			return err
		}
		if len(route.Brokers) != 1 || route.Brokers[0].Addrs["0"] != masterAddr || route.Brokers[0].Addrs["1"] != slaveAddr {
			return fmt.Errorf("route %+v", route)
		}
		return nil
	})

	// Messages through the SDK: found by key, and the chart moves.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	copts := client.ClientOptions{Registries: []string{reg}}
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: copts, Group: "console-p"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := p.Send(ctx, &client.Message{Topic: topic, Keys: []string{fmt.Sprint("k-", i)}, Body: []byte(fmt.Sprint("m-", i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, 200)
	testutil.Eventually(t, 20*time.Second, func() error {
		var msgs []struct{ Body []byte }
		if err := bob.get("/api/messages/by-key?topic="+topic+"&key=k-199", &msgs); err != nil {
			return err
		}
		if len(msgs) != 1 || string(msgs[0].Body) != "m-199" {
			return fmt.Errorf("by key: %d messages", len(msgs))
		}
		return nil
	})
	testutil.Eventually(t, 20*time.Second, func() error {
		var s struct {
			Series map[string][]struct{ T, V float64 } `json:"series"`
		}
		if err := bob.get("/api/series?prefix=topic:&top=5", &s); err != nil {
			return err
		}
		for _, pt := range s.Series["topic:"+topic] {
			if pt.V > 0 {
				return nil
			}
		}
		return errors.New("no rate for the topic in the chart series")
	})

	// A consumer group: one member, no lag; caught up, its pulls are held.
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: copts, Group: "console-cg", From: client.ConsumeFromFirst},
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
	defer pc.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		var g struct {
			Members  []any   `json:"members"`
			TotalLag float64 `json:"totalLag"`
		}
		if err := bob.get("/api/groups/console-cg", &g); err != nil {
			return err
		}
		if len(g.Members) != 1 || g.TotalLag != 0 {
			return fmt.Errorf("group: %d members, lag %v", len(g.Members), g.TotalLag)
		}
		if held, _ := sum(scrape(t, mMaster), "smartgo_held_pulls"); held < 1 {
			return errors.New("no held pull on the master")
		}
		return nil
	})

	// The slave stops: the master's lag grows in bytes and seconds, on the
	// cluster page and on /metrics; it continues and catches up.
	if err := slave.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	send(200, 50)
	// Until the master drops the silent slave (ha idle timeout), the lag
	// grows. The console's call to the stopped slave waits out its 2 s
	// request timeout, so /metrics is polled first.
	testutil.Eventually(t, 10*time.Second, func() error {
		page := scrape(t, mMaster)
		lb, _ := sum(page, "smartgo_replication_lag_bytes")
		ls, _ := sum(page, "smartgo_replication_lag_seconds")
		if lb <= 0 || ls <= 0 {
			return fmt.Errorf("slave stopped: metrics lag %v B %v s", lb, ls)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		cl = consoleCluster{}
		if err := bob.get("/api/cluster", &cl); err != nil {
			return err
		}
		m, err := cl.member(masterAddr)
		if err != nil {
			return err
		}
		if m.LagBytes <= 0 || m.LagSeconds <= 0 {
			return fmt.Errorf("slave stopped: console lag %d B %.1f s", m.LagBytes, m.LagSeconds)
		}
		return nil
	})
	if err := slave.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		cl = consoleCluster{}
		if err := bob.get("/api/cluster", &cl); err != nil {
			return err
		}
		m, err := cl.member(masterAddr)
		if err != nil {
			return err
		}
		s, err := cl.member(slaveAddr)
		if err != nil {
			return err
		}
		page := scrape(t, mMaster)
		lb, _ := sum(page, "smartgo_replication_lag_bytes")
		ls, _ := sum(page, "smartgo_replication_lag_seconds")
		if m.LagBytes != 0 || m.LagSeconds != 0 || s.MaxOffset != m.MaxOffset || lb != 0 || ls != 0 {
			return fmt.Errorf("slave continued: master %+v slave %+v, metrics %v B %v s", m, s, lb, ls)
		}
		return nil
	})

	// MQTT: the bridge node counts a device's connection; the console
	// disconnects it and it is gone.
	dialPaho(t, ctx, mqttAddr, "console-cluster-dev", nil)
	conns := func(want int64) func() error {
		return func() error {
			cl = consoleCluster{}
			if err := bob.get("/api/cluster", &cl); err != nil {
				return err
			}
			if len(cl.Bridges) != 1 || cl.Bridges[0].Connections != want {
				return fmt.Errorf("bridge nodes %+v, want %d connections", cl.Bridges, want)
			}
			return nil
		}
	}
	testutil.Eventually(t, 15*time.Second, conns(1))
	var clients struct {
		Total int `json:"total"`
	}
	if err := bob.get("/api/mqtt/clients?prefix=console-cluster", &clients); err != nil || clients.Total != 1 {
		t.Fatalf("MQTT clients: %+v %v", clients, err)
	}
	if code, err := bob.call("POST", "/api/mqtt/clients/console-cluster-dev/disconnect", nil, nil); err != nil || code != http.StatusForbidden {
		t.Fatalf("read-only user disconnects a client: %d %v", code, err)
	}
	if code, err := alice.call("POST", "/api/mqtt/clients/console-cluster-dev/disconnect", nil, nil); err != nil || code != http.StatusOK {
		t.Fatalf("disconnect: %d %v", code, err)
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		if err := bob.get("/api/mqtt/clients?prefix=console-cluster", &clients); err != nil {
			return err
		}
		if clients.Total != 0 {
			return fmt.Errorf("%d clients after the disconnect", clients.Total)
		}
		return conns(0)()
	})
}
