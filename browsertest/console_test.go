// Package browsertest drives SmartGo's web console in a real headless
// browser (Debian's chromium, through chromedp) against a real
// `smartgo standalone` process. It is its own module so that the main
// module does not depend on chromedp; `make browser` and .ci/run run it,
// and it skips when chromium is not installed. Screenshots of every page
// go to $SMARTGO_ARTIFACTS (default: a directory under the system temp
// directory), never into the repository.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/amqp/wire"
	"github.com/smartgo/smartgo/client"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/mqtt"
)

// chromium returns the browser to drive, or skips the test.
func chromium(t *testing.T) string {
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium installed (apt-get install chromium); the console's browser tests need it")
	return ""
}

// artifacts returns the directory screenshots go to.
func artifacts(t *testing.T) string {
	dir := os.Getenv("SMARTGO_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "smartgo-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

type cluster struct {
	registry, mqtt, console, amqp string
	cmd                           *exec.Cmd
}

// startStandalone runs the smartgo binary's standalone mode with a console
// that alice (admin) and bob (read-only) log in to.
func startStandalone(t *testing.T) *cluster {
	bin := testnet.SmartgoBinary(t, "..")
	dir := t.TempDir()
	var lines []string
	for _, u := range [][2]string{{"alice", "alice-secret"}, {"bob", "bob-secret"}} {
		l, err := mqtt.HashPassword(u[0], u[1])
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	creds := filepath.Join(dir, "console.passwd")
	if err := os.WriteFile(creds, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := testnet.FreePorts(t, 5)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	c := &cluster{registry: addr(0), mqtt: addr(2), console: addr(3), amqp: addr(4)}
	logf, err := os.Create(filepath.Join(dir, "standalone.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(bin, "standalone", "-data", filepath.Join(dir, "data"),
		"-set", "registry.listen="+c.registry, "-set", "broker.listen="+addr(1), "-set", "bridge.listen="+c.mqtt,
		"-set", "console.listen="+c.console, "-set", "console.credentials_file="+creds, "-set", "console.admin_users=alice",
		"-set", "console.sample_interval=1s", "-set", "bridge.heartbeat_interval=1s",
		"-set", "store.segment_size=8MiB", "-set", "store.max_message_size=1MiB", "-set", "amqp.listen="+c.amqp)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("standalone exit: %v (log: %s)", err, logf.Name())
			}
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			t.Error("standalone did not stop")
		}
		logf.Close()
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + c.console + "/api/session")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return c
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("console did not come up: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// browser starts a headless chromium: as root it needs --no-sandbox, and
// a fresh profile keeps runs independent.
func browser(t *testing.T, execPath string) (context.Context, context.CancelFunc) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(execPath), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 1000),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, tcancel := context.WithTimeout(ctx, 4*time.Minute)
	return ctx, func() { tcancel(); cancel(); acancel() }
}

// failOnUncaught fails the test at its end for every JavaScript exception
// the pages did not catch (a broken page, whatever it shows).
func failOnUncaught(t *testing.T, ctx context.Context) {
	var mu sync.Mutex
	var thrown []string
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			d := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				d += " " + e.ExceptionDetails.Exception.Description
			}
			mu.Lock()
			thrown = append(thrown, d)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range thrown {
			t.Errorf("uncaught JavaScript exception: %s", d)
		}
	})
}

// TestBrowserConsole logs in, opens every page (a screenshot of each),
// creates a topic and sees it listed, sends messages and sees the topic's
// chart move, finds a message by key, disconnects an MQTT client and sees
// it gone, and browses a state store key.
func TestBrowserConsole(t *testing.T) {
	execPath := chromium(t)
	shots := artifacts(t)
	c := startStandalone(t)
	ctx, cancel := browser(t, execPath)
	defer cancel()
	failOnUncaught(t, ctx)
	base := "http://" + c.console
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var buf []byte
			if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644)
		})
	}
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			var b []byte
			_ = chromedp.Run(ctx, chromedp.FullScreenshot(&b, 100))
			_ = os.WriteFile(filepath.Join(shots, "failed.png"), b, 0o644)
			t.Fatalf("%s: %v (screenshot failed.png)", what, err)
		}
	}
	// setValue sets an input's value (clearing it first for SendKeys).
	setValue := func(sel, v string) chromedp.Action {
		return chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).value = %q`, sel, v), nil)
	}
	// waitJS polls a JavaScript condition.
	waitJS := func(expr string) chromedp.Action {
		var ok bool
		return chromedp.Poll(expr, &ok, chromedp.WithPollingTimeout(45*time.Second))
	}

	// Log in: a wrong password first.
	run("login page", chromedp.Navigate(base+"/"), chromedp.WaitVisible("#login-form", chromedp.ByQuery), shot("login"))
	run("wrong password", chromedp.SendKeys("#login-user", "alice", chromedp.ByQuery), chromedp.SendKeys("#login-pass", "nope", chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery), waitJS(`document.getElementById("login-error").textContent.includes("wrong")`))
	run("log in", setValue("#login-pass", ""), chromedp.SendKeys("#login-pass", "alice-secret", chromedp.ByQuery), chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#nav", chromedp.ByQuery), waitJS(`document.getElementById("whoami").textContent.includes("alice")`))

	// Cluster.
	run("cluster page", chromedp.Navigate(base+"/#/cluster"),
		waitJS(`document.querySelectorAll('table[data-table=brokers] tbody tr[data-key]').length === 1`),
		waitJS(`document.querySelectorAll('table[data-table=bridges] tbody tr[data-key]').length === 1`),
		shot("cluster"))

	// Topics: create one through the form and the confirmation.
	run("create topic", chromedp.Navigate(base+"/#/topics"), chromedp.WaitVisible("#new-topic", chromedp.ByQuery), chromedp.Click("#new-topic", chromedp.ByQuery),
		chromedp.WaitVisible("#topic-name", chromedp.ByQuery), chromedp.SendKeys("#topic-name", "BrowserT", chromedp.ByQuery),
		setValue("#topic-readQueues", "2"), setValue("#topic-writeQueues", "2"),
		chromedp.Click(`#dialog button[data-action=save]`, chromedp.ByQuery), chromedp.WaitVisible(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		chromedp.Click(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		waitJS(`!!document.querySelector('table[data-table=topics] tr[data-key="BrowserT"]')`), shot("topics-created"))

	// Send messages for a while; the topic chart must move.
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{c.registry}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sctx, stop := context.WithCancel(context.Background())
	var sent atomic.Int64
	// The first send acknowledged is the one looked up by key below: the
	// sends before it may fail (the producer's first route lookup on a
	// busy machine).
	firstSent := int64(-1)
	var failed []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; sctx.Err() == nil; i++ {
			if _, err := p.Send(sctx, &client.Message{Topic: "BrowserT", Body: []byte(fmt.Sprintf(`{"order":%d,"item":"widget"}`, i)),
				Keys: []string{"key-" + strconv.Itoa(i)}}); err == nil {
				if sent.Add(1) == 1 {
					firstSent = int64(i)
				}
			} else if sctx.Err() == nil && firstSent < 0 {
				failed = append(failed, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	run("chart moves", waitJS(`Number((document.querySelector('canvas[data-chart=topics]')||{dataset:{}}).dataset.max||0) > 0`), shot("topics"))
	stop()
	<-done
	if sent.Load() == 0 {
		t.Fatalf("no message sent: %v", failed)
	}
	if len(failed) > 0 {
		t.Logf("%d sends failed before the first acknowledged one (order %d), the last: %v", len(failed), firstSent, failed[len(failed)-1])
	}
	run("topic page", chromedp.Navigate(base+"/#/topic/BrowserT"),
		waitJS(`document.querySelectorAll('table[data-table=queues] tbody tr').length === 2`),
		waitJS(`Number(document.querySelector('canvas[data-chart=topic]').dataset.max||0) > 0`), shot("topic"))

	// Consumer groups: a push consumer joins one.
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: []string{c.registry}},
		Group: "browser-g", From: client.ConsumeFromFirst}, func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe("BrowserT", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	run("groups page", chromedp.Navigate(base+"/#/groups"),
		waitJS(`!!document.querySelector('table[data-table=groups] tr[data-key="browser-g"]')`), shot("groups"))
	run("group page", chromedp.Navigate(base+"/#/group/browser-g"),
		waitJS(`document.querySelectorAll('table[data-table=members] tbody tr').length === 1 && !document.querySelector('table[data-table=members] td.empty')`),
		shot("group"))
	// A group no broker knows says so, not an empty page; a hand-typed
	// hash with a malformed escape still opens its page.
	run("missing group", chromedp.Navigate(base+"/#/group/no-such-group"),
		waitJS(`document.getElementById("page-error").textContent.includes("does not exist: no-such-group")`), shot("group-missing"))
	run("malformed hash", chromedp.Navigate(base+"/#/topic/bad%E0%A4%A"),
		waitJS(`document.querySelector("main h1").textContent === "Topic bad%E0%A4%A" && !!document.getElementById("topic-missing")`))
	run("the error goes with its page", chromedp.Navigate(base+"/#/group/browser-g"),
		waitJS(`document.querySelectorAll('table[data-table=members] tbody tr').length === 1 && !document.querySelector('table[data-table=members] td.empty')`),
		waitJS(`document.getElementById("page-error").textContent === ""`))

	// Messages: find one by key and see its body as JSON.
	run("message by key", chromedp.Navigate(base+"/#/messages"), chromedp.WaitVisible("#msg-topic", chromedp.ByQuery),
		chromedp.SendKeys("#msg-topic", "BrowserT", chromedp.ByQuery), chromedp.SendKeys("#msg-key", "key-"+strconv.FormatInt(firstSent, 10), chromedp.ByQuery), chromedp.Click("#by-key", chromedp.ByQuery),
		waitJS(fmt.Sprintf(`(document.querySelector('#message-detail pre[data-body]')||{textContent:""}).textContent.includes('"order": %d')`, firstSent)),
		shot("messages"))
	// The Message id shown, typed into By id: without its topic a toast
	// names the mix-up, with it the message is found.
	var msgID string
	run("the message id shown", chromedp.Evaluate(`document.querySelector('#message-detail h2').textContent.replace(/^Message /, "")`, &msgID))
	if len(msgID) != 32 {
		t.Fatalf("message id %q", msgID)
	}
	run("message by client id", chromedp.Click(`button[data-tab=id]`, chromedp.ByQuery), chromedp.WaitVisible("#msg-id", chromedp.ByQuery),
		chromedp.SendKeys("#msg-id", msgID, chromedp.ByQuery), chromedp.Click("#by-id", chromedp.ByQuery),
		waitJS(`[...document.querySelectorAll('#toasts .toast.bad')].some((t) => t.textContent.includes("is a client message id (the Message id column)"))`),
		chromedp.Evaluate(`document.getElementById("message-detail").replaceChildren()`, nil),
		chromedp.SendKeys("#msg-idtopic", "BrowserT", chromedp.ByQuery), chromedp.Click("#by-id", chromedp.ByQuery),
		waitJS(fmt.Sprintf(`(document.querySelector('#message-detail pre[data-body]')||{textContent:""}).textContent.includes('"order": %d')`, firstSent)))

	// MQTT: a connected client is listed, then disconnected from the page.
	nc, err := net.Dial("tcp", c.mqtt)
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan byte, 1)
	mc := paho.NewClient(paho.ClientConfig{ClientID: "browser-dev", Conn: nc, OnServerDisconnect: func(d *paho.Disconnect) { gone <- d.ReasonCode }})
	expiry := uint32(600)
	if _, err := mc.Connect(ctx, &paho.Connect{ClientID: "browser-dev", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "devices/browser-dev/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Publish(ctx, &paho.Publish{Topic: "devices/browser-dev/state", QoS: 1, Retain: true, Payload: []byte("online")}); err != nil {
		t.Fatal(err)
	}
	run("mqtt clients", chromedp.Navigate(base+"/#/mqtt/clients"),
		waitJS(`!!document.querySelector('table[data-table=mqtt-clients] tr[data-key="browser-dev"]')`),
		waitJS(`Number(document.querySelector('canvas[data-chart=mqtt]').dataset.max||0) > 0`), shot("mqtt-clients"))
	run("disconnect", chromedp.Click(`button[data-disconnect="browser-dev"]`, chromedp.ByQuery), chromedp.WaitVisible(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		chromedp.Click(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		waitJS(`!document.querySelector('table[data-table=mqtt-clients] tr[data-key="browser-dev"]')`))
	select {
	case code := <-gone:
		if code != 0x98 {
			t.Fatalf("DISCONNECT reason %#x, want 0x98", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client got no DISCONNECT")
	}
	run("mqtt sessions", chromedp.Navigate(base+"/#/mqtt/sessions"),
		waitJS(`!!document.querySelector('table[data-table=mqtt-sessions] tr[data-key="browser-dev"]')`), shot("mqtt-sessions"))
	run("mqtt retained", chromedp.Navigate(base+"/#/mqtt/retained"),
		waitJS(`!!document.querySelector('table[data-table=mqtt-retained] tr[data-key="devices/browser-dev/state"]')`), shot("mqtt-retained"))

	// AMQP: a client's queue and connection are listed; the queue is
	// purged and the connection closed from the page.
	ac := dialAMQP(t, c.amqp)
	ac.call(&wire.QueueDeclare{Queue: "browser-q"})
	for i := range 3 {
		ac.publish("browser-q", fmt.Sprint("job ", i))
	}
	ac.call(&wire.BasicQos{PrefetchCount: 1})
	ac.call(&wire.BasicConsume{Queue: "browser-q", ConsumerTag: "browser-worker"})
	row := `table[data-table=amqp-queues] tr[data-key$="/browser-q"]`
	cells := `[...document.querySelectorAll('` + row + ` td')].map((td) => td.textContent)`
	run("amqp queues", chromedp.Navigate(base+"/#/amqp/queues"),
		// Queue, vhost, node, flags, ready, unacked: one delivery waits for its ack.
		waitJS(`(`+cells+`).slice(3, 6).join("|") === "-|2|1"`), shot("amqp-queues"))
	run("purge", chromedp.Click(`button[data-purge="browser-q"]`, chromedp.ByQuery), chromedp.WaitVisible(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		chromedp.Click(`#dialog button[data-action=confirm]`, chromedp.ByQuery), waitJS(`(`+cells+`).slice(3, 6).join("|") === "-|0|1"`))
	me := ac.nc.LocalAddr().String()
	run("amqp connections", chromedp.Navigate(base+"/#/amqp/connections"),
		// Connection, node, user, vhost, client, channels, state.
		waitJS(fmt.Sprintf(`[...document.querySelectorAll('table[data-table=amqp-connections] tr[data-key$="/%s"] td')].map((td) => td.textContent)[6] === "running"`, me)),
		shot("amqp-connections"))
	run("close", chromedp.Click(fmt.Sprintf(`button[data-close="%s"]`, me), chromedp.ByQuery), chromedp.WaitVisible(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		chromedp.Click(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		waitJS(fmt.Sprintf(`!document.querySelector('table[data-table=amqp-connections] tr[data-key$="/%s"]')`, me)))
	if code, text := ac.closedWith(); code != wire.ConnectionForced || !strings.Contains(text, "console by alice") {
		t.Fatalf("the AMQP client got connection.close %d %q, want 320 naming alice", code, text)
	}

	// State store.
	ss, err := sscli.Dial(ctx, sscli.Options{Addr: c.mqtt, ClientID: "browser-ss"})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, _, err := ss.Set(ctx, []byte("device-7/temperature"), []byte("21.5"), sscli.SetOptions{})
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state store SET: %v", errors.Join(err, ctx.Err()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A device made with the admin CLI shows with its twin.
	if out, err := exec.Command(testnet.SmartgoBinary(t, ".."), "admin", "-registry", c.registry, "device", "create", "-d", "pump-17").CombinedOutput(); err != nil {
		t.Fatalf("admin device create: %v\n%s", err, out)
	}
	run("state store", chromedp.Navigate(base+"/#/statestore"), chromedp.WaitVisible("#ss-prefix", chromedp.ByQuery),
		chromedp.SendKeys("#ss-prefix", "device-7/", chromedp.ByQuery), chromedp.Click("#ss-search", chromedp.ByQuery),
		waitJS(`!!document.querySelector('table[data-table=statestore] tr[data-key="device-7/temperature"]')`),
		waitJS(`!!document.querySelector('table[data-table=devices] tr[data-key="pump-17"]')`),
		chromedp.Click(`table[data-table=devices] tr[data-key="pump-17"]`, chromedp.ByQuery),
		waitJS(`(document.querySelector('pre[data-twin="pump-17"]')||{textContent:""}).textContent.includes('"deviceId": "pump-17"')`),
		// Never active: "-", not the twin API's 0001-01-01T00:00:00Z.
		waitJS(`[...document.querySelectorAll('table[data-table=devices] tr[data-key="pump-17"] td')].map((td) => td.textContent).join("|") === "pump-17|enabled|Disconnected|-|0"`),
		shot("statestore"))

	// One read queue of two that hold messages: the update is toasted
	// with a warning (the last use of BrowserT's queues).
	run("fewer read queues warn", chromedp.Navigate(base+"/#/topic/BrowserT"), chromedp.WaitVisible("#edit-topic", chromedp.ByQuery),
		chromedp.Click("#edit-topic", chromedp.ByQuery), chromedp.WaitVisible("#topic-readQueues", chromedp.ByQuery),
		setValue("#topic-readQueues", "1"), setValue("#topic-writeQueues", "1"),
		chromedp.Click(`#dialog button[data-action=save]`, chromedp.ByQuery), chromedp.WaitVisible(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		chromedp.Click(`#dialog button[data-action=confirm]`, chromedp.ByQuery),
		waitJS(`[...document.querySelectorAll('#toasts .toast.bad')].some((t) => t.textContent.includes("queues 1 and above of BrowserT hold "))`), shot("topic-shrunk"))

	// Dark mode, and a read-only user who sees no admin controls.
	run("dark", chromedp.Navigate(base+"/#/cluster"), chromedp.Click("#theme-toggle", chromedp.ByQuery),
		waitJS(`document.documentElement.dataset.theme === "dark"`),
		waitJS(`document.querySelectorAll('table[data-table=brokers] tbody tr[data-key]').length === 1`), shot("cluster-dark"))
	run("read-only user", chromedp.Click("#logout", chromedp.ByQuery), chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		setValue("#login-user", ""), chromedp.SendKeys("#login-user", "bob", chromedp.ByQuery), chromedp.SendKeys("#login-pass", "bob-secret", chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery), chromedp.Navigate(base+"/#/topics"),
		waitJS(`!!document.querySelector('table[data-table=topics] tr[data-key="BrowserT"]') && !document.getElementById("new-topic")`),
		shot("topics-readonly"))
}
