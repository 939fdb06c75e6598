package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/client"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
)

// standalone runs `smartgo standalone` in process on free ports with the
// extra flags and returns the log, the addresses it logged, and a stop
// function that checks the exit code.
func standalone(t *testing.T, extra ...string) (logs *testutil.LogBuffer, addrs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.LogBuffer
	done := make(chan int, 1)
	args := append([]string{"standalone", "-set", "amqp.listen=", "-data", t.TempDir(), "-set", "registry.listen=127.0.0.1:0", "-set", "broker.listen=127.0.0.1:0",
		"-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=127.0.0.1:0", "-set", "store.segment_size=4MiB",
		"-set", "store.max_message_size=1MiB", "-set", "bridge.heartbeat_interval=1s"}, extra...)
	go func() { done <- run(ctx, args, &out, &errb) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("standalone exit %d:\n%s", code, errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("standalone did not stop")
		}
	})
	re := regexp.MustCompile(`standalone running.*registry=(127\.0\.0\.1:\d+).*bridge=(127\.0\.0\.1:\d+)`)
	cre := regexp.MustCompile(`console listening.*url=http://(127\.0\.0\.1:\d+)/`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, c := re.FindStringSubmatch(errb.String()), cre.FindStringSubmatch(errb.String())
		if m != nil && c != nil {
			return &errb, map[string]string{"registry": m[1], "mqtt": m[2], "console": c[1]}
		}
		if time.Now().After(deadline) {
			t.Fatalf("standalone did not come up:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// webClient is a browser-like HTTP client of the console: a cookie jar
// and the CSRF token of its login.
type webClient struct {
	t    *testing.T
	base string
	hc   *http.Client
	csrf string
}

func newWebClient(t *testing.T, addr string) *webClient {
	jar, _ := cookiejar.New(nil)
	return &webClient{t: t, base: "http://" + addr, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// do sends a request; body (if not nil) is JSON; hdr adds headers. It
// returns the status and the decoded JSON answer.
func (w *webClient) do(method, path string, body any, hdr map[string]string) (int, map[string]any, []byte) {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.base+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet && w.csrf != "" {
		req.Header.Set("X-CSRF-Token", w.csrf)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, raw
}

// want checks the status of a call and returns its raw answer.
func (w *webClient) want(code int, method, path string, body any) []byte {
	w.t.Helper()
	got, m, raw := w.do(method, path, body, nil)
	if got != code {
		w.t.Fatalf("%s %s: status %d (want %d): %v %s", method, path, got, code, m, raw)
	}
	return raw
}

func (w *webClient) login(user, pass string) int {
	w.t.Helper()
	code, m, _ := w.do("POST", "/api/login", map[string]string{"user": user, "password": pass}, nil)
	if code == http.StatusOK {
		w.csrf, _ = m["csrf"].(string)
	}
	return code
}

func decode[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, raw)
	}
	return v
}

// TestCmdConsoleAPI drives the console's JSON API over HTTP against a
// running standalone process: logins and roles, every page's calls
// (cluster, topics, groups, messages, MQTT, state store, chart series),
// and the bad inputs that must change nothing: a wrong password (rate
// limited), a forged CSRF token, a read-only user's change, a bad topic
// name, a huge page size, a body that is too large or not JSON.
func TestCmdConsoleAPI(t *testing.T) {
	creds := mqtttest.CredentialsFile(t, "alice", "alice-pw", "bob", "bob-pw")
	logs, addrs := standalone(t, "-set", "console.credentials_file="+creds, "-set", "console.admin_users=alice",
		"-set", "console.sample_interval=1s")
	anon := newWebClient(t, addrs["console"])
	anon.want(http.StatusUnauthorized, "GET", "/api/cluster", nil)
	if code, m, _ := anon.do("GET", "/api/session", nil, nil); code != http.StatusUnauthorized || m["login"] != true {
		t.Fatalf("session before login: %d %v", code, m)
	}
	if code, _, raw := anon.do("GET", "/", nil, nil); code != 200 || !bytes.Contains(raw, []byte("SmartGo console")) {
		t.Fatalf("index page: %d", code)
	}

	alice, bob := newWebClient(t, addrs["console"]), newWebClient(t, addrs["console"])
	if alice.login("alice", "alice-pw") != 200 || bob.login("bob", "bob-pw") != 200 {
		t.Fatal("logins failed")
	}
	if s := decode[map[string]any](t, alice.want(200, "GET", "/api/session", nil)); s["role"] != "admin" || s["user"] != "alice" {
		t.Fatalf("alice's session: %v", s)
	}
	if s := decode[map[string]any](t, bob.want(200, "GET", "/api/session", nil)); s["role"] != "read-only" {
		t.Fatalf("bob's session: %v", s)
	}

	// Cluster: the registry, the broker, the bridge node.
	testutil.WaitFor(t, 20*time.Second, "bridge node in the cluster page", func() bool {
		c := decode[struct {
			Registries []map[string]any `json:"registries"`
			Brokers    []map[string]any `json:"brokers"`
			Bridges    []map[string]any `json:"bridges"`
		}](t, bob.want(200, "GET", "/api/cluster", nil))
		return len(c.Registries) == 1 && c.Registries[0]["ok"] == true && len(c.Brokers) == 1 && c.Brokers[0]["role"] == "ASYNC_MASTER" &&
			c.Brokers[0]["bootTime"].(float64) > 0 && c.Brokers[0]["diskRatio"].(float64) > 0 && len(c.Bridges) == 1
	})

	topicBody := map[string]any{"name": "ConsoleT", "readQueues": 2, "writeQueues": 2, "perm": 6}
	// Refused changes, each leaving the topic list as it was.
	bob.want(http.StatusForbidden, "POST", "/api/topics", topicBody) // read-only
	if code, m, _ := alice.do("POST", "/api/topics", topicBody, map[string]string{"X-CSRF-Token": ""}); code != http.StatusForbidden ||
		!strings.Contains(fmt.Sprint(m["error"]), "CSRF") {
		t.Fatalf("no CSRF token: %d %v", code, m)
	}
	if code, _, _ := alice.do("POST", "/api/topics", topicBody, map[string]string{"X-CSRF-Token": "forged"}); code != http.StatusForbidden {
		t.Fatalf("forged CSRF token: %d", code)
	}
	if code, _, _ := alice.do("POST", "/api/topics", topicBody, map[string]string{"X-CSRF-Token": bob.csrf}); code != http.StatusForbidden {
		t.Fatalf("another session's CSRF token: %d", code)
	}
	if code, _, _ := alice.do("POST", "/api/topics", topicBody, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Fatalf("cross-origin: %d", code)
	}
	if code, _, _ := alice.do("POST", "/api/topics", []byte(`name=ConsoleT`), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); code != http.StatusUnsupportedMediaType {
		t.Fatalf("form body: %d", code)
	}
	if code, m, _ := alice.do("POST", "/api/topics", map[string]any{"name": "bad topic!", "readQueues": 1, "writeQueues": 1, "perm": 6}, nil); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(m["error"]), "allowed are") {
		t.Fatalf("bad topic name: %d %v", code, m)
	}
	alice.want(http.StatusBadRequest, "POST", "/api/topics", map[string]any{"name": "ConsoleT", "readQueues": 1, "writeQueues": 1, "perm": 9})
	alice.want(http.StatusBadRequest, "POST", "/api/topics", map[string]any{"name": "TBW102", "readQueues": 1, "writeQueues": 1, "perm": 6})
	alice.want(http.StatusBadRequest, "POST", "/api/topics", map[string]any{"name": "ConsoleT", "readQueues": 100000, "writeQueues": 1, "perm": 6})
	alice.want(http.StatusRequestEntityTooLarge, "POST", "/api/topics", append(append([]byte(`{"name":"`), bytes.Repeat([]byte("x"), 2<<20)...), `"}`...))
	for _, tp := range decode[[]map[string]any](t, alice.want(200, "GET", "/api/topics", nil)) {
		if tp["name"] == "ConsoleT" || strings.HasPrefix(fmt.Sprint(tp["name"]), "bad") {
			t.Fatalf("a refused change created topic %v", tp["name"])
		}
	}

	// Create, list, route.
	alice.want(200, "POST", "/api/topics", topicBody)
	testutil.WaitFor(t, 10*time.Second, "topic listed", func() bool {
		for _, tp := range decode[[]map[string]any](t, bob.want(200, "GET", "/api/topics", nil)) {
			if tp["name"] == "ConsoleT" {
				return true
			}
		}
		return false
	})
	if rd := decode[map[string]any](t, bob.want(200, "GET", "/api/topics/ConsoleT/route", nil)); len(rd["queueDatas"].([]any)) != 1 {
		t.Fatalf("route: %v", rd)
	}
	bob.want(http.StatusNotFound, "GET", "/api/topics/NoSuchTopic/route", nil)
	// A name alone takes the CLI's defaults (8 queues, perm 6); perm used
	// to be required.
	alice.want(200, "POST", "/api/topics", map[string]any{"name": "ConsoleDefaults"})
	testutil.WaitFor(t, 10*time.Second, "defaults topic routed", func() bool {
		code, rd, _ := bob.do("GET", "/api/topics/ConsoleDefaults/route", nil, nil)
		if code != 200 {
			return false
		}
		qd := rd["queueDatas"].([]any)[0].(map[string]any)
		if qd["readQueueNums"] != 8.0 || qd["writeQueueNums"] != 8.0 || qd["perm"] != 6.0 {
			t.Fatalf("defaults: %v", qd)
		}
		return true
	})

	// Messages: produce with keys, find by key, by id, browse; the topic's
	// chart series shows the rate.
	p := testProducer(t, []string{addrs["registry"]})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sent *client.SendResult
	for i := range 50 {
		r, err := p.Send(ctx, &client.Message{Topic: "ConsoleT", Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), Keys: []string{fmt.Sprintf("order-%d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		sent = r
	}
	var byKey []map[string]any
	testutil.WaitFor(t, 10*time.Second, "message by key", func() bool {
		byKey = decode[[]map[string]any](t, bob.want(200, "GET", "/api/messages/by-key?topic=ConsoleT&key=order-49", nil))
		return len(byKey) == 1
	})
	if byKey[0]["body"] != "eyJuIjo0OX0=" || byKey[0]["bodyUtf8"] != true {
		t.Fatalf("by key: %v", byKey[0])
	}
	if m := decode[[]map[string]any](t, bob.want(200, "GET", "/api/messages/by-id?id="+sent.OffsetMsgID, nil)); len(m) != 1 || m[0]["offsetMsgId"] != sent.OffsetMsgID {
		t.Fatalf("by id: %v", m)
	}
	bob.want(http.StatusBadRequest, "GET", "/api/messages/by-id?id=nonsense", nil)
	// The Message id column (the client's UNIQ_KEY) where the offset id
	// goes: without its topic a 400 naming the mix-up, with it the message.
	if msg := string(bob.want(http.StatusBadRequest, "GET", "/api/messages/by-id?id="+sent.MsgID, nil)); !strings.Contains(msg, "is a client message id (the Message id column), not an offset id: give its topic too") {
		t.Fatalf("by id, a client message id without topic: %s", msg)
	}
	if m := decode[[]map[string]any](t, bob.want(200, "GET", "/api/messages/by-id?topic=ConsoleT&id="+sent.MsgID, nil)); len(m) != 1 || m[0]["offsetMsgId"] != sent.OffsetMsgID {
		t.Fatalf("by id, a client message id with its topic: %v", m)
	}
	bob.want(http.StatusBadRequest, "GET", "/api/messages/by-id?topic=bad/topic&id="+sent.MsgID, nil)
	broker := byKey[0]["broker"].(string)
	q := int(byKey[0]["queueId"].(float64))
	br := decode[map[string]any](t, bob.want(200, "GET", fmt.Sprintf("/api/messages/browse?topic=ConsoleT&broker=%s&queue=%d&offset=0&count=5", broker, q), nil))
	if msgs := br["messages"].([]any); len(msgs) != 5 || br["maxOffset"].(float64) < 5 {
		t.Fatalf("browse: %v", br)
	}
	bob.want(http.StatusBadRequest, "GET", "/api/messages/browse?topic=ConsoleT&broker="+broker+"&queue=0&count=100000", nil)
	testutil.WaitFor(t, 20*time.Second, "topic rate in the series", func() bool {
		s := decode[struct {
			Series map[string][]struct{ T, V float64 } `json:"series"`
		}](t, bob.want(200, "GET", "/api/series?prefix=topic:&top=5", nil))
		for _, pt := range s.Series["topic:ConsoleT"] {
			if pt.V > 0 {
				return true
			}
		}
		return false
	})

	// A consumer group: members, lag, reset by time, resend.
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: []string{addrs["registry"]}},
		Group: "console-g", From: client.ConsumeFromFirst}, func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe("ConsoleT", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	defer func() {
		if t.Failed() {
			t.Logf("last group answer: %v", last)
		}
	}()
	testutil.WaitFor(t, 30*time.Second, "group member and progress", func() bool {
		last = decode[map[string]any](t, bob.want(200, "GET", "/api/groups/console-g", nil))
		n := 0
		for _, q := range last["queues"].([]any) {
			if q.(map[string]any)["queue"].(map[string]any)["topic"] == "ConsoleT" {
				n++
			}
		}
		return len(last["members"].([]any)) == 1 && n == 2 && last["totalLag"].(float64) == 0
	})
	found := false
	for _, g := range decode[[]map[string]any](t, bob.want(200, "GET", "/api/groups", nil)) {
		found = found || g["name"] == "console-g" && g["members"].(float64) == 1
	}
	if !found {
		t.Fatal("group not in the list")
	}
	alice.want(200, "POST", "/api/messages/resend", map[string]any{"msgId": sent.OffsetMsgID, "group": "console-g"})
	alice.want(http.StatusNotFound, "POST", "/api/messages/resend", map[string]any{"msgId": sent.OffsetMsgID, "group": "no-such-group"})
	pc.Close()
	bob.want(http.StatusForbidden, "POST", "/api/groups/console-g/reset", map[string]any{"topic": "ConsoleT", "timestamp": 1})
	reset := decode[map[string]any](t, alice.want(200, "POST", "/api/groups/console-g/reset", map[string]any{"topic": "ConsoleT", "timestamp": 1}))
	if len(reset["resets"].([]any)) != 2 {
		t.Fatalf("reset: %v", reset)
	}
	testutil.WaitFor(t, 10*time.Second, "lag after reset", func() bool {
		return decode[map[string]any](t, bob.want(200, "GET", "/api/groups/console-g", nil))["totalLag"].(float64) >= 50
	})

	// MQTT: a paho client, its session, a retained message; disconnect.
	nc, err := net.Dial("tcp", addrs["mqtt"])
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan *paho.Disconnect, 1)
	mc := paho.NewClient(paho.ClientConfig{ClientID: "console-dev", Conn: nc, OnServerDisconnect: func(d *paho.Disconnect) { gone <- d }})
	expiry := uint32(600)
	if _, err := mc.Connect(ctx, &paho.Connect{ClientID: "console-dev", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "console/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Publish(ctx, &paho.Publish{Topic: "console/lamp", QoS: 1, Retain: true, Payload: []byte("on")}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "client listed", func() bool {
		c := decode[map[string]any](t, bob.want(200, "GET", "/api/mqtt/clients?prefix=console-", nil))
		return c["total"].(float64) == 1
	})
	if s := decode[map[string]any](t, bob.want(200, "GET", "/api/mqtt/sessions?prefix=console-", nil)); s["total"].(float64) != 1 {
		t.Fatalf("sessions: %v", s)
	}
	if r := decode[map[string]any](t, bob.want(200, "GET", "/api/mqtt/retained?prefix=console/", nil)); r["total"].(float64) != 1 {
		t.Fatalf("retained: %v", r)
	}
	bob.want(http.StatusBadRequest, "GET", "/api/mqtt/clients?limit=100000", nil)
	bob.want(http.StatusForbidden, "POST", "/api/mqtt/clients/console-dev/disconnect", nil)
	alice.want(200, "POST", "/api/mqtt/clients/console-dev/disconnect", nil)
	select {
	case d := <-gone:
		if d.ReasonCode != 0x98 {
			t.Fatalf("DISCONNECT reason %#x", d.ReasonCode)
		}
	case <-ctx.Done():
		t.Fatal("no DISCONNECT")
	}
	if c := decode[map[string]any](t, bob.want(200, "GET", "/api/mqtt/clients?prefix=console-", nil)); c["total"].(float64) != 0 {
		t.Fatalf("client still listed: %v", c)
	}
	alice.want(http.StatusNotFound, "POST", "/api/mqtt/clients/console-dev/disconnect", nil)

	// State store: keys by prefix with versions.
	ss, err := sscli.Dial(ctx, sscli.Options{Addr: addrs["mqtt"], ClientID: "console-ss"})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	testutil.WaitFor(t, 20*time.Second, "state store SET", func() bool {
		ok, _, err := ss.Set(ctx, []byte("console/k1"), []byte("v1"), sscli.SetOptions{})
		return err == nil && ok
	})
	keys := decode[map[string]any](t, bob.want(200, "GET", "/api/statestore/keys?prefix=console/", nil))
	if k := keys["keys"].([]any); len(k) != 1 || k[0].(map[string]any)["key"] != "Y29uc29sZS9rMQ==" || k[0].(map[string]any)["version"] == "" {
		t.Fatalf("state store keys: %v", keys)
	}
	bob.want(http.StatusBadRequest, "GET", "/api/statestore/keys?limit=5000", nil)

	// Twins: a device made with the admin CLI is listed, its twin shown,
	// its keys never.
	if code, _, stderr := runCmd(t, "admin", "-registry", addrs["registry"], "device", "create", "-d", "console-pump"); code != exitOK {
		t.Fatalf("device create: %s", stderr)
	}
	devs := decode[map[string]any](t, bob.want(200, "GET", "/api/twins?pageSize=10", nil))
	if d := devs["devices"].([]any); len(d) != 1 || d[0].(map[string]any)["deviceId"] != "console-pump" || d[0].(map[string]any)["authentication"] != nil {
		t.Fatalf("devices: %v", devs)
	}
	if tw := decode[map[string]any](t, bob.want(200, "GET", "/api/twins/console-pump", nil)); tw["twin"].(map[string]any)["deviceId"] != "console-pump" {
		t.Fatalf("twin: %v", tw)
	}
	bob.want(http.StatusNotFound, "GET", "/api/twins/no-such-device", nil)
	bob.want(http.StatusBadRequest, "GET", "/api/twins?pageSize=100000", nil)

	// Fewer read queues than queues holding messages: the answer warns
	// (and the page toasts it); growing back does not.
	shrunk := decode[map[string]any](t, alice.want(200, "PUT", "/api/topics/ConsoleT", map[string]any{"readQueues": 1, "writeQueues": 1, "perm": 6}))
	if ws, _ := shrunk["warnings"].([]any); len(ws) != 1 || !strings.Contains(ws[0].(string), "'s queues 1 and above of ConsoleT hold ") {
		t.Fatalf("shrink: %v", shrunk)
	}
	if grown := decode[map[string]any](t, alice.want(200, "PUT", "/api/topics/ConsoleT", map[string]any{"readQueues": 2, "writeQueues": 2, "perm": 6})); grown["warnings"] != nil {
		t.Fatalf("growth: %v", grown)
	}

	// Delete the topic (admin only); then log out.
	bob.want(http.StatusForbidden, "DELETE", "/api/topics/ConsoleT", nil)
	alice.want(200, "DELETE", "/api/topics/ConsoleT", nil)
	alice.want(http.StatusBadRequest, "DELETE", "/api/topics/bad%20name", nil)
	bob.want(200, "POST", "/api/logout", nil)
	bob.want(http.StatusUnauthorized, "GET", "/api/cluster", nil)
	bob.want(http.StatusNotFound, "GET", "/api/nothing", nil)

	// Wrong passwords: refused, then rate limited (even the right one).
	w := newWebClient(t, addrs["console"])
	for i := 0; i < 5; i++ {
		if code := w.login("alice", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i, code)
		}
	}
	code, _, _ := w.do("POST", "/api/login", map[string]string{"user": "alice", "password": "alice-pw"}, nil)
	if code != http.StatusTooManyRequests {
		t.Fatalf("after 5 failures: %d, want 429", code)
	}
	// Logged with the user and the address, and the log is rate limited
	// too: one line per reason per 10 s, not one per attempt.
	var failed int
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "console: login failed") {
			failed++
			if !strings.Contains(line, "user=alice") || !strings.Contains(line, "remote=127.0.0.1") {
				t.Errorf("failed login logged without user or address: %s", line)
			}
		}
	}
	if failed < 1 || failed >= 5 {
		t.Errorf("%d log lines for 5 failed logins, want one per 10 s", failed)
	}
	if !strings.Contains(logs.String(), "console: login refused: too many failures") {
		t.Error("the locked-out login was not logged")
	}
}

// TestCmdConsoleOpenMode: without a credentials file the console needs no
// login (anonymous admin) but still wants the CSRF token and refuses a
// Host that is not an IP address (DNS rebinding); it may not listen
// beyond loopback.
func TestCmdConsoleOpenMode(t *testing.T) {
	_, addrs := standalone(t)
	w := newWebClient(t, addrs["console"])
	s := decode[map[string]any](t, w.want(200, "GET", "/api/session", nil))
	if s["user"] != "anonymous" || s["role"] != "admin" || s["login"] != false {
		t.Fatalf("open session: %v", s)
	}
	body := map[string]any{"name": "OpenT", "readQueues": 1, "writeQueues": 1, "perm": 6}
	w.want(http.StatusForbidden, "POST", "/api/topics", body) // no CSRF token yet
	w.csrf = s["csrf"].(string)
	if code, _, _ := w.do("GET", "/api/cluster", nil, map[string]string{"Host": "rebound.example:8080"}); code != http.StatusMisdirectedRequest {
		t.Fatalf("foreign Host: %d", code)
	}
	w.want(200, "POST", "/api/topics", body)

	// Bound to loopback unless configured otherwise.
	if h, _, err := net.SplitHostPort(conf.Default().Console.Listen); err != nil || !net.ParseIP(h).IsLoopback() {
		t.Fatalf("default console.listen %q is not a loopback address", conf.Default().Console.Listen)
	}
	if code, _, stderr := runCmd(t, "console", "-listen", "0.0.0.0:0"); code != exitUsage || !strings.Contains(stderr, "loopback") {
		t.Fatalf("open console on every interface: %d %q", code, stderr)
	}
}

// TestCmdConsoleHidesSystemTopics: the topic list a new user sees first
// holds their topics only; the topics the broker creates itself (the
// state store's and twins', its cluster's and broker group's, RocketMQ's
// fixed ones) come with system=1, marked system.
func TestCmdConsoleHidesSystemTopics(t *testing.T) {
	_, addrs := standalone(t)
	w := newWebClient(t, addrs["console"])
	s := decode[map[string]any](t, w.want(200, "GET", "/api/session", nil))
	w.csrf = s["csrf"].(string)
	w.want(200, "POST", "/api/topics", map[string]any{"name": "UserT"})
	d := conf.Default()
	own := []string{"%SYS_STATESTORE", "%SYS_TWIN", d.Broker.Cluster, d.Broker.Name, d.Broker.Cluster + "_REPLY_TOPIC",
		"SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "TBW102", "MQTT_INGRESS"}
	testutil.WaitFor(t, 20*time.Second, "every topic listed with system=1", func() bool {
		sys := map[string]bool{}
		for _, tp := range decode[[]map[string]any](t, w.want(200, "GET", "/api/topics?system=1", nil)) {
			sys[fmt.Sprint(tp["name"])] = tp["system"] == true
		}
		for _, n := range own {
			if v, ok := sys[n]; !ok {
				return false
			} else if !v {
				t.Fatalf("topic %s is listed as a user topic", n)
			}
		}
		if v, ok := sys["UserT"]; !ok || v {
			return false
		}
		return true
	})
	var names []string
	for _, tp := range decode[[]map[string]any](t, w.want(200, "GET", "/api/topics", nil)) {
		names = append(names, fmt.Sprint(tp["name"]))
	}
	if !slices.Contains(names, "UserT") || slices.ContainsFunc(names, func(n string) bool { return slices.Contains(own, n) }) {
		t.Fatalf("default topic list %v: want UserT and none of %v", names, own)
	}
}
