package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// process starts the smartgo binary with args, its output in dir/name.log;
// it is killed at the end of the test.
func process(t *testing.T, dir, name string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testnet.SmartgoBinary(t, ".."), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s:\n%s", name, b)
		}
	})
	return cmd
}

// TestBrowserConsoleBrokerDown drives the pages of an open console next to
// a cluster of separate processes while part of it is down: with broker-a's
// master killed, its topic is listed and its page shows the route and
// queues (from the slave) instead of "No such topic"; with broker-b hung
// (SIGSTOP), the topics and groups pages show the others and name broker-b
// above their tables, and broker-b's own topic's page says broker-b did not
// answer rather than "No such topic". No page throws.
func TestBrowserConsoleBrokerDown(t *testing.T) {
	execPath := chromium(t)
	dir := t.TempDir()
	ports := testnet.FreePorts(t, 5)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, slaveA, masterB, consoleAddr := addr(0), addr(1), addr(2), addr(3), addr(4)
	process(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	common := []string{"-registries", reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1"}
	ma := process(t, dir, "master-a", append([]string{"broker", "-listen", masterA, "-data", filepath.Join(dir, "ma")}, common...)...)
	process(t, dir, "slave-a", append([]string{"broker", "-listen", slaveA, "-data", filepath.Join(dir, "sa"),
		"-set", "broker.role=slave", "-set", "broker.id=1", "-set", "broker.slave_sync_interval=200ms"}, common...)...)
	mb := process(t, dir, "master-b", append([]string{"broker", "-listen", masterB, "-data", filepath.Join(dir, "mb"),
		"-set", "broker.name=broker-b", "-set", "broker.cluster=OtherCluster"}, common...)...)
	process(t, dir, "console", "console", "-listen", consoleAddr, "-registries", reg, "-set", "console.request_timeout=3s")

	adm, err := admin.New(admin.Options{Registries: []string{reg}})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	actx, acancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer acancel()
	for _, tc := range [][2]string{{"DefaultCluster", "DownT"}, {"OtherCluster", "OtherT"}} {
		for ctx := actx; ; time.Sleep(200 * time.Millisecond) {
			err := adm.CreateTopic(ctx, tc[0], admin.TopicConfig{Name: tc[1], ReadQueues: 2, WriteQueues: 2})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("create topic %s: %v", tc[1], err)
			}
		}
	}
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{reg}}, Group: "browser-down"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 10 {
		if _, err := p.Send(actx, &client.Message{Topic: "DownT", Body: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}

	// The slave has copied the topic (slave_sync_interval) before the
	// master goes.
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for {
		resp, err := rc.Invoke(actx, slaveA, protocol.NewRequest(protocol.GetAllTopicConfig, nil, nil))
		if err == nil && resp.Code == protocol.Success {
			var w protocol.TopicConfigSerializeWrapper
			if protocol.DecodeJSON(resp.Body, &w) == nil && w.TopicConfigTable["DownT"] != nil {
				break
			}
		}
		if actx.Err() != nil {
			t.Fatalf("the slave never copied DownT: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := browser(t, execPath)
	defer cancel()
	var thrown []string
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			thrown = append(thrown, e.ExceptionDetails.Error())
		}
	})
	base := "http://" + consoleAddr
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitJS := func(expr string) chromedp.Action {
		var ok bool
		return chromedp.Poll(expr, &ok, chromedp.WithPollingTimeout(45*time.Second))
	}
	run("topics page", chromedp.Navigate(base+"/#/topics"),
		waitJS(`[...document.querySelectorAll('table[data-table=topics] tbody tr[data-key]')].some((r) => r.dataset.key === "DownT")`))

	// broker-a's master dies: once the registry routes broker-a to its
	// slave alone, the topic is still there.
	if err := ma.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for {
		rd, err := adm.TopicRoute(actx, "DownT")
		if err == nil && len(rd.BrokerDatas) == 1 && rd.BrokerDatas[0].MasterAddr() == "" {
			break
		}
		if actx.Err() != nil {
			t.Fatalf("route still has the master: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run("topics page, master dead", chromedp.Navigate(base+"/#/cluster"), chromedp.Navigate(base+"/#/topics"),
		waitJS(`[...document.querySelectorAll('table[data-table=topics] tbody tr[data-key]')].some((r) => r.dataset.key === "DownT")`))
	run("topic page, master dead", chromedp.Navigate(base+"/#/topic/DownT"),
		waitJS(`document.querySelectorAll('table[data-table=route] tbody tr[data-key], table[data-table=route] tbody tr').length > 0 &&
			!document.querySelector("main").textContent.includes("No such topic")`))

	// broker-b hangs: the pages name it above what the others returned.
	if err := mb.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, pg := range []struct{ hash, partial string }{{"topics", "#topics-partial"}, {"groups", "#groups-partial"}} {
		run(pg.hash+" page, broker-b hung", chromedp.Navigate(base+"/#/cluster"), chromedp.Navigate(base+"/#/"+pg.hash),
			waitJS(fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent.includes(%q)`, pg.partial, masterB)))
	}
	// broker-b's own topic is not "no such topic" while broker-b does not
	// answer.
	run("broker-b's topic page, broker-b hung", chromedp.Navigate(base+"/#/topic/OtherT"),
		waitJS(fmt.Sprintf(`(document.querySelector("#topic-missing") || {textContent: ""}).textContent.includes(%q)`, masterB)))
	var main string
	run("topics text", chromedp.Navigate(base+"/#/topics"),
		waitJS(fmt.Sprintf(`(document.querySelector("#topics-partial") || {textContent: ""}).textContent.includes(%q)`, masterB)),
		chromedp.Text("main", &main, chromedp.ByQuery))
	if !strings.Contains(main, "DownT") {
		t.Errorf("topics page with broker-b hung lacks DownT:\n%s", main)
	}
	if len(thrown) > 0 {
		t.Errorf("the pages threw: %q", thrown)
	}
}
