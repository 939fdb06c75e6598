package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// The reserved-topic conformance suite: every wildcard form against every
// reserved prefix (the state store's statestore/# and
// clients/statestore/#, the $SYS tree, and a reserved filter with a '+'
// level as a Handler owner might register), through paho.golang and the
// mosquitto clients. A filter reaching reserved topics only by a wildcard
// is granted and never receives them (MQTT 5 §4.7.2 extended to the
// reserved filters); a filter naming one is refused with 0x8F unless
// Options.Reserved allows it; $SYS is read-only and subscribable.

// reservedFilters are the server's reserved filters in these tests: the
// defaults plus one with a wildcard level.
var reservedFilters = append(slices.Clone(DefaultReservedFilters), "fleet/+/secret/#")

// Internal traffic on reserved topics (published with Server.Publish) and
// ordinary traffic around it, in publish order.
var (
	resTopics = []string{
		"statestore/v1/k/command/invoke",
		"clients/statestore/v1/dev/notify",
		"fleet/f1/secret/key",
	}
	plainTopics = []string{"a/C", "clients/other", "x", "fleet/f1/public", "statestorex/y"}
)

// wildcardCases: for each filter, the SUBACK reason (v5) and the topics
// (of resTopics then plainTopics, in that order) it must receive; the
// $SYS filters receive the tree's retained values ("..." stands for the
// whole tree: every value, nothing outside $SYS/broker/).
var wildcardCases = []struct {
	filter string
	code   byte
	want   []string
}{
	{"#", 0, []string{"a/C", "clients/other", "x", "fleet/f1/public", "statestorex/y"}},
	{"+", 0, []string{"x"}},
	{"+/+", 0, []string{"a/C", "clients/other", "statestorex/y"}},
	{"+/#", 0, []string{"a/C", "clients/other", "x", "fleet/f1/public", "statestorex/y"}},
	{"+/C", 0, []string{"a/C"}},
	{"a/#", 0, []string{"a/C"}},
	{"+/+/+/+/+", 0, nil},
	{"+/statestore/#", 0, nil},
	{"clients/#", 0, []string{"clients/other"}},
	{"clients/+/#", 0, []string{"clients/other"}},
	{"clients/+/v1/#", 0, nil},
	{"fleet/#", 0, []string{"fleet/f1/public"}},
	{"fleet/f1/#", 0, []string{"fleet/f1/public"}},
	{"fleet/+/+/key", 0, nil},
	{"$share/g/#", 0, []string{"a/C", "clients/other", "x", "fleet/f1/public", "statestorex/y"}},
	{"$SYS/#", 0, []string{"..."}},
	{"$SYS/+/version", 0, []string{"$SYS/broker/version"}},
	{"statestore/+", 0x8F, nil},
	{"statestore/#", 0x8F, nil},
	{"statestore/v1/k/command/invoke", 0x8F, nil},
	{"clients/statestore/#", 0x8F, nil},
	{"clients/statestore/+/dev/#", 0x8F, nil},
	{"fleet/+/secret/#", 0x8F, nil},
	{"fleet/f1/secret/+", 0x8F, nil},
	{"$share/g/statestore/#", 0x8F, nil},
}

func startReserved(t *testing.T, mod func(*Options)) *testServer {
	return startServer(t, func(o *Options) {
		o.ReservedFilters = reservedFilters
		o.Reserved = func(c ClientInfo, topicOrFilter string, subscribe bool) bool {
			return c.ClientID == "internal-ok"
		}
		if mod != nil {
			mod(o)
		}
	})
}

// publishInternal publishes the reserved topics (retained) and the plain
// ones through Server.Publish, then the sentinel.
func publishInternal(t *testing.T, ts *testServer, sentinel string) {
	t.Helper()
	ctx := context.Background()
	for _, tp := range append(slices.Clone(resTopics), plainTopics...) {
		if err := ts.Publish(ctx, &Message{Topic: tp, Payload: []byte("v"), Retain: slices.Contains(resTopics, tp)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Publish(ctx, &Message{Topic: sentinel, Payload: []byte("end")}); err != nil {
		t.Fatal(err)
	}
}

func TestMQTTWildcardsOverReservedTopicsPaho(t *testing.T) {
	ts := startReserved(t, func(o *Options) { o.SysInterval = time.Hour }) // published once, at start
	peers := make([]*pahoPeer, len(wildcardCases))
	for i, c := range wildcardCases {
		p := pahoDial(t, ts.addr, &paho.Connect{ClientID: fmt.Sprintf("w%d", i), CleanStart: true, KeepAlive: 30}, nil)
		codes := p.subscribe(t, nil, paho.SubscribeOptions{Topic: c.filter}, paho.SubscribeOptions{Topic: "sentinel"})
		if !slices.Equal(codes, []byte{c.code, 0}) {
			t.Errorf("SUBSCRIBE %q: SUBACK %#x, want [%#x 0]", c.filter, codes, c.code)
		}
		peers[i] = p
	}
	// A client Options.Reserved allows names reserved filters and gets
	// their traffic, retained messages included.
	ok := pahoDial(t, ts.addr, &paho.Connect{ClientID: "internal-ok", CleanStart: true, KeepAlive: 30}, nil)
	if codes := ok.subscribe(t, nil, paho.SubscribeOptions{Topic: "statestore/#"}, paho.SubscribeOptions{Topic: "clients/statestore/+/dev/#"},
		paho.SubscribeOptions{Topic: "fleet/+/secret/#"}, paho.SubscribeOptions{Topic: "sentinel"}); !slices.Equal(codes, []byte{0, 0, 0, 0}) {
		t.Fatalf("allowed client: SUBACK %#x", codes)
	}
	publishInternal(t, ts, "sentinel")
	for i, c := range wildcardCases {
		got := peers[i].topicsUntil(t, "sentinel")
		if slices.Equal(c.want, []string{"..."}) && len(got) == len(ts.sysValues()) &&
			!slices.ContainsFunc(got, func(tp string) bool { return !strings.HasPrefix(tp, "$SYS/broker/") }) {
			got = []string{"..."}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q received %q, want %q", c.filter, got, c.want)
		}
	}
	if got := ok.topicsUntil(t, "sentinel"); !slices.Equal(got, resTopics) {
		t.Errorf("allowed client received %q, want %q", got, resTopics)
	}
	// Retained messages on reserved topics: a new "#" subscriber gets
	// none of them; the allowed client gets them when it subscribes.
	late := pahoDial(t, ts.addr, &paho.Connect{ClientID: "late", CleanStart: true, KeepAlive: 30}, nil)
	late.subscribe(t, nil, paho.SubscribeOptions{Topic: "#"}, paho.SubscribeOptions{Topic: "+/#"}, paho.SubscribeOptions{Topic: "clients/#"})
	late.subscribe(t, nil, paho.SubscribeOptions{Topic: "sentinel"})
	ok2 := pahoDial(t, ts.addr, &paho.Connect{ClientID: "internal-ok", CleanStart: true, KeepAlive: 30}, nil)
	ok2.subscribe(t, nil, paho.SubscribeOptions{Topic: "statestore/#"})
	if m := ok2.next(t, 5*time.Second); m.Topic != resTopics[0] || !m.Retain {
		t.Fatalf("allowed client's retained: %q retain=%v", m.Topic, m.Retain)
	}
	if err := ts.Publish(context.Background(), &Message{Topic: "sentinel"}); err != nil {
		t.Fatal(err)
	}
	if got := late.topicsUntil(t, "sentinel"); len(got) != 0 {
		t.Fatalf("late wildcard subscriber got retained %q", got)
	}
}

// TestMQTTReservedTopicsV311: a 3.1.1 client gets the same grants, with
// 0x80 for every refusal (3.1.1 has no other failure code).
func TestMQTTReservedTopicsV311(t *testing.T) {
	ts := startReserved(t, nil)
	r := connected(t, ts.addr, v311, "old")
	var subs []packets.Subscription
	var want []packets.ReasonCode
	for _, c := range wildcardCases {
		subs = append(subs, sub(c.filter, 1))
		if c.code != 0 {
			want = append(want, packets.V3SubackFailure)
		} else {
			want = append(want, 1)
		}
	}
	if sa := r.subscribe(1, subs...); !slices.Equal(sa.ReasonCodes, want) {
		t.Fatalf("SUBACK %v, want %v", sa.ReasonCodes, want)
	}
}

// TestMQTTMosquittoSubAll: "mosquitto_sub -t '#'", what a new user types
// first, in 3.1.1 and 5: granted, and it prints the ordinary traffic and
// none of the reserved.
func TestMQTTMosquittoSubAll(t *testing.T) {
	subBin, _ := mosquittoBins(t)
	ts := startReserved(t, nil)
	host, port := hostPort(ts.addr)
	for _, ver := range []string{"mqttv311", "mqttv5"} {
		t.Run(ver, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			id := "mosq-all-" + ver
			sentinel := "end-" + ver
			want := append(slices.Clone(wildcardCases[0].want), sentinel)
			cmd := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-V", ver, "-i", id, "-t", "#", "-v", "-C", fmt.Sprint(len(want)))
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 10*time.Second, "mosquitto_sub subscribed", func() bool { return ts.subscribedTo(id, sentinel) })
			publishInternal(t, ts, sentinel)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("mosquitto_sub -t '#': %v\n%s", err, out)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				lines = append(lines, strings.Fields(l)[0])
			}
			if !slices.Equal(lines, want) {
				t.Fatalf("mosquitto_sub -t '#' printed topics %q, want %q", lines, want)
			}
		})
	}
}

// TestMQTTMosquittoSubReservedRefused: mosquitto_sub naming a reserved
// filter is refused, and says so, in 3.1.1 and 5.
func TestMQTTMosquittoSubReservedRefused(t *testing.T) {
	subBin, _ := mosquittoBins(t)
	ts := startReserved(t, nil)
	host, port := hostPort(ts.addr)
	for _, ver := range []string{"mqttv311", "mqttv5"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out := runMosquitto(t, ctx, true, subBin, "-h", host, "-p", port, "-V", ver, "-t", "statestore/#", "-C", "1", "-W", "5")
		cancel()
		if !strings.Contains(out, "denied") {
			t.Fatalf("%s: mosquitto_sub -t statestore/# printed %q, want a denial", ver, out)
		}
	}
}

// TestMQTTSysTree: the $SYS tree is published with mosquitto's topic
// names, read with mosquitto_sub and paho: granted to any client the ACL
// allows, refused to one it denies, read-only, refreshed every
// SysInterval, and absent when disabled.
func TestMQTTSysTree(t *testing.T) {
	subBin, pubBin := mosquittoBins(t)
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("default allow\nclient nosys\ndeny subscribe $SYS/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startReserved(t, func(o *Options) { o.SysInterval = 100 * time.Millisecond; o.ACLFile = acl })
	host, port := hostPort(ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wantTopics := []string{"version", "uptime", "clients/connected", "clients/disconnected", "clients/total",
		"messages/received", "messages/sent", "publish/messages/received", "publish/messages/sent",
		"publish/messages/dropped", "bytes/received", "bytes/sent", "subscriptions/count", "retained messages/count"}
	// mosquitto_sub lists the tree (as retained messages) and leaves at
	// the first live refresh.
	out := runMosquitto(t, ctx, true, subBin, "-h", host, "-p", port, "-t", "$SYS/#", "-v", "--retained-only", "-W", "5")
	for _, w := range wantTopics {
		if !strings.Contains(out, "$SYS/broker/"+w+" ") {
			t.Errorf("mosquitto_sub -t '$SYS/#' lacks $SYS/broker/%s:\n%s", w, out)
		}
	}
	p := pahoDial(t, ts.addr, &paho.Connect{ClientID: "sysreader", CleanStart: true, KeepAlive: 30}, nil)
	if codes := p.subscribe(t, nil, paho.SubscribeOptions{Topic: "$SYS/#"}); !slices.Equal(codes, []byte{0}) {
		t.Fatalf("$SYS/# SUBACK %#x", codes)
	}
	seen := map[string]string{}
	for len(seen) < len(wantTopics) {
		m := p.next(t, 5*time.Second)
		if !m.Retain {
			continue // a refresh of a value already seen
		}
		seen[strings.TrimPrefix(m.Topic, "$SYS/broker/")] = string(m.Payload)
	}
	for _, w := range wantTopics {
		if _, ok := seen[w]; !ok {
			t.Errorf("$SYS/broker/%s missing (got %v)", w, seen)
		}
	}
	if !strings.HasPrefix(seen["version"], "smartgo version ") || !strings.HasSuffix(seen["uptime"], " seconds") {
		t.Errorf("version %q uptime %q", seen["version"], seen["uptime"])
	}
	// The values follow the server: a second subscriber with two
	// subscriptions shows up in clients/connected and subscriptions/count.
	p2 := pahoDial(t, ts.addr, &paho.Connect{ClientID: "sysreader2", CleanStart: true, KeepAlive: 30}, nil)
	p2.subscribe(t, nil, paho.SubscribeOptions{Topic: "$SYS/broker/clients/connected"}, paho.SubscribeOptions{Topic: "$SYS/broker/subscriptions/count"})
	want := map[string]string{"$SYS/broker/clients/connected": "2", "$SYS/broker/subscriptions/count": "3"}
	for got := map[string]string{}; !mapsEqual(got, want); {
		m := p2.next(t, 5*time.Second)
		got[m.Topic] = string(m.Payload)
	}
	// mosquitto_sub reads a single value the way monitoring scripts do.
	out = runMosquitto(t, ctx, false, subBin, "-h", host, "-p", port, "-V", "5", "-t", "$SYS/broker/version", "-C", "1")
	if strings.TrimSpace(out) != seen["version"] {
		t.Fatalf("mosquitto_sub $SYS/broker/version printed %q", out)
	}
	// Read-only: paho's QoS 1 PUBLISH is refused, mosquitto_pub's
	// (3.1.1) dropped; neither reaches the subscribers.
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := p.Publish(pctx, &paho.Publish{Topic: "$SYS/broker/version", QoS: 1, Payload: []byte("fake")})
	pcancel()
	if resp == nil || resp.ReasonCode != byte(packets.ReasonNotAuthorized) {
		t.Fatalf("publish into $SYS: %+v %v", resp, err)
	}
	runMosquitto(t, ctx, false, pubBin, "-h", host, "-p", port, "-q", "1", "-t", "$SYS/broker/version", "-m", "fake")
	// The ACL decides who may read: "nosys" is denied.
	denied := pahoDial(t, ts.addr, &paho.Connect{ClientID: "nosys", CleanStart: true, KeepAlive: 30}, nil)
	if codes := denied.subscribe(t, nil, paho.SubscribeOptions{Topic: "$SYS/#"}); !slices.Equal(codes, []byte{0x87}) {
		t.Fatalf("ACL-denied $SYS/# SUBACK %#x, want 0x87", codes)
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case m := <-p.msgs:
			if string(m.Payload) == "fake" {
				t.Fatalf("a client's PUBLISH reached $SYS: %q", m.Topic)
			}
		case <-time.After(50 * time.Millisecond):
		}
	}

	// SysInterval < 0: no tree (the subscription is still granted).
	off := startReserved(t, func(o *Options) { o.SysInterval = -1 })
	q := pahoDial(t, off.addr, &paho.Connect{ClientID: "nosystree", CleanStart: true, KeepAlive: 30}, nil)
	if codes := q.subscribe(t, nil, paho.SubscribeOptions{Topic: "$SYS/#"}, paho.SubscribeOptions{Topic: "sentinel"}); !slices.Equal(codes, []byte{0, 0}) {
		t.Fatalf("SUBACK %#x", codes)
	}
	if err := off.Publish(context.Background(), &Message{Topic: "sentinel"}); err != nil {
		t.Fatal(err)
	}
	if got := q.topicsUntil(t, "sentinel"); len(got) != 0 {
		t.Fatalf("disabled $SYS tree published %q", got)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMQTTSubscribeRefusalCodesAndLog: an ACL denial is 0x87, a reserved
// filter 0x8F; refusals are logged at debug level with the client and
// the filter, within a per-connection budget.
func TestMQTTSubscribeRefusalCodesAndLog(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("default allow\nall\ndeny subscribe secret/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lb := &testutil.LogBuffer{}
	ts := startServer(t, func(o *Options) {
		o.ACLFile = acl
		o.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	p := pahoDial(t, ts.addr, &paho.Connect{ClientID: "refused", CleanStart: true, KeepAlive: 30}, nil)
	codes := p.subscribe(t, nil, paho.SubscribeOptions{Topic: "secret/x"}, paho.SubscribeOptions{Topic: "statestore/+"},
		paho.SubscribeOptions{Topic: "ok/#"})
	if !slices.Equal(codes, []byte{0x87, 0x8F, 0}) {
		t.Fatalf("SUBACK %#x, want [0x87 0x8f 0]", codes)
	}
	for _, want := range []string{`level=DEBUG msg="mqtt: subscribe refused" client=refused`,
		`filter=secret/x reason="not authorized" code=135`, `filter=statestore/+ reason="topic filter invalid" code=143`} {
		if !strings.Contains(lb.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, lb.String())
		}
	}
	// A client refused in a loop costs at most logBurst lines a window.
	for range 50 {
		p.subscribe(t, nil, paho.SubscribeOptions{Topic: "secret/y"})
	}
	if n := strings.Count(lb.String(), "mqtt: subscribe refused"); n > logBurst {
		t.Fatalf("%d refusal lines logged, budget %d", n, logBurst)
	}
	// Below debug level nothing is logged.
	quiet := startServer(t, nil) // Info
	q := pahoDial(t, quiet.addr, &paho.Connect{ClientID: "quiet", CleanStart: true, KeepAlive: 30}, nil)
	q.subscribe(t, nil, paho.SubscribeOptions{Topic: "statestore/#"})
	if strings.Contains(quiet.logs.String(), "subscribe refused") {
		t.Fatalf("refusal logged at info: %s", quiet.logs.String())
	}
}

// TestMQTTSubscribeBackendFailure: when the backend cannot record a
// SUBSCRIBE's subscriptions (the cluster session log), they are refused
// with 0x80 and undone: nothing is delivered to them, and a subscription
// they would have replaced stays as it was.
func TestMQTTSubscribeBackendFailure(t *testing.T) {
	fb := &failingSubsBackend{MemoryBackend: NewMemoryBackend()}
	opts := DefaultOptions()
	opts.Listen = []string{"127.0.0.1:0"}
	s, err := NewServer(opts, fb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr := s.Addrs()[0].String()
	p := pahoDial(t, addr, &paho.Connect{ClientID: "sub", CleanStart: true, KeepAlive: 30}, nil)
	if codes := p.subscribe(t, nil, paho.SubscribeOptions{Topic: "keep/#", QoS: 1}); !slices.Equal(codes, []byte{1}) {
		t.Fatalf("SUBACK %#x", codes)
	}
	// keep/# would be replaced at QoS 0 and fail/x added; the save fails.
	if codes := p.subscribe(t, nil, paho.SubscribeOptions{Topic: "keep/#", QoS: 0}, paho.SubscribeOptions{Topic: "fail/x", QoS: 1}); !slices.Equal(codes, []byte{0x80, 0x80}) {
		t.Fatalf("SUBACK %#x, want [0x80 0x80]", codes)
	}
	if n := s.Stats().Subscriptions.Load(); n != 1 {
		t.Fatalf("%d subscriptions after the failed SUBSCRIBE, want 1", n)
	}
	ctx := context.Background()
	s.Publish(ctx, &Message{Topic: "fail/x", QoS: 1, Payload: []byte("no")})
	s.Publish(ctx, &Message{Topic: "keep/1", QoS: 1, Payload: []byte("yes")})
	if m := p.next(t, 5*time.Second); m.Topic != "keep/1" || m.QoS != 1 {
		t.Fatalf("got %q at QoS %d, want keep/1 at QoS 1 (the old subscription)", m.Topic, m.QoS)
	}
}

// failingSubsBackend is a MemoryBackend whose SaveSubscriptions fails for
// filters under fail/ (a cluster session log that cannot be written).
type failingSubsBackend struct {
	*MemoryBackend
}

func (b *failingSubsBackend) SaveSubscriptions(_ context.Context, st *SessionState) error {
	for _, s := range st.Subscriptions {
		if strings.HasPrefix(s.Filter, "fail/") {
			return fmt.Errorf("session log unavailable")
		}
	}
	return nil
}

// TestMQTTACLDenyByNameUnderWildcard: a "#" subscription granted by a
// wide allow rule does not receive topics that an earlier deny rule
// refuses by name, neither live nor retained; a client whose own section
// allows them still gets them. Before the per-delivery check, "#" received
// secret/x.
func TestMQTTACLDenyByNameUnderWildcard(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	rules := "default deny\nclient boss\nallow subscribe #\nallow publish #\n" +
		"all\ndeny subscribe secret/#\nallow subscribe #\nallow publish #\n"
	if err := os.WriteFile(acl, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) { o.ACLFile = acl; o.SysInterval = -1 })
	ctx := context.Background()
	pub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "pub", CleanStart: true, KeepAlive: 30}, nil)
	if _, err := pub.Publish(ctx, &paho.Publish{Topic: "secret/kept", QoS: 1, Retain: true, Payload: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, &paho.Publish{Topic: "public/kept", QoS: 1, Retain: true, Payload: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	user := pahoDial(t, ts.addr, &paho.Connect{ClientID: "user", CleanStart: true, KeepAlive: 30}, nil)
	boss := pahoDial(t, ts.addr, &paho.Connect{ClientID: "boss", CleanStart: true, KeepAlive: 30}, nil)
	if codes := user.subscribe(t, nil, paho.SubscribeOptions{Topic: "#", QoS: 1}, paho.SubscribeOptions{Topic: "secret/x"}); !slices.Equal(codes, []byte{1, 0x87}) {
		t.Fatalf("user SUBACK %#x, want [1 0x87]", codes)
	}
	if codes := boss.subscribe(t, nil, paho.SubscribeOptions{Topic: "#", QoS: 1}); !slices.Equal(codes, []byte{1}) {
		t.Fatalf("boss SUBACK %#x", codes)
	}
	for _, topic := range []string{"secret/x", "secret/y/z", "public/x", "end"} {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(topic)}); err != nil {
			t.Fatal(err)
		}
	}
	got := user.topicsUntil(t, "end")
	slices.Sort(got)
	if want := []string{"public/kept", "public/x"}; !slices.Equal(got, want) {
		t.Fatalf("user under # got %q, want %q", got, want)
	}
	got = boss.topicsUntil(t, "end")
	slices.Sort(got)
	if want := []string{"public/kept", "public/x", "secret/kept", "secret/x", "secret/y/z"}; !slices.Equal(got, want) {
		t.Fatalf("boss under # got %q, want %q", got, want)
	}
}
