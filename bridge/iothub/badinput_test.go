package iothub

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestHubTwinBadInput: malformed requests and patches that break a rule
// get an error status with an errorCode body (what the SDKs look for), and
// nothing changes; the log lines a device drives are rate-limited.
func TestHubTwinBadInput(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.TwinRate = 1000 })
	dev := createDevice(t, n, "bad-1")
	id := Identity{DeviceID: "bad-1"}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d.subscribe(twinResFilter)
	if st, _, _ := d.request("$iothub/twin/PATCH/properties/reported/?$rid=ok", []byte(`{"a":1}`)); st != 204 {
		t.Fatalf("first patch %d", st)
	}
	deep := strings.Repeat(`{"x":`, 12) + "1" + strings.Repeat("}", 12)
	big := fmt.Sprintf(`{"big":"%s"}`, strings.Repeat("y", 4000))
	var bigPatches []string
	for i := range 9 {
		bigPatches = append(bigPatches, fmt.Sprintf(`{"b%d":"%s"}`, i, strings.Repeat("z", 4000)))
	}
	for _, tc := range []struct {
		name, topic, body string
		status            int
		text              string
	}{
		{"malformed JSON", "$iothub/twin/PATCH/properties/reported/?$rid=1", `{"a":`, 400, "JSON"},
		{"not an object", "$iothub/twin/PATCH/properties/reported/?$rid=2", `[1,2]`, 400, ""},
		{"key with a dot", "$iothub/twin/PATCH/properties/reported/?$rid=3", `{"a.b":1}`, 400, "a.b"},
		{"key with $", "$iothub/twin/PATCH/properties/reported/?$rid=4", `{"$x":1}`, 400, "$x"},
		{"too deep", "$iothub/twin/PATCH/properties/reported/?$rid=5", deep, 400, "depth"},
		{"integer over 2^52", "$iothub/twin/PATCH/properties/reported/?$rid=6", `{"n":4503599627370496}`, 400, "integer"},
		{"string over 4 KiB", "$iothub/twin/PATCH/properties/reported/?$rid=7", fmt.Sprintf(`{"s":"%s"}`, strings.Repeat("q", 4097)), 400, "4096"},
		{"wrong $version", "$iothub/twin/PATCH/properties/reported/?$rid=8&$version=99", `{"a":2}`, 412, "version"},
		{"bad $version", "$iothub/twin/PATCH/properties/reported/?$rid=9&$version=x", `{"a":2}`, 400, "$version"},
		{"no $rid", "$iothub/twin/GET/", ``, 400, "$rid"},
	} {
		st, topic, body := d.request(tc.topic, []byte(tc.body))
		var eb errorBody
		if st != tc.status || json.Unmarshal(body, &eb) != nil || eb.ErrorCode/1000 != tc.status || !strings.Contains(eb.Message, tc.text) {
			t.Errorf("%s: %d %s %s", tc.name, st, topic, body)
		}
	}
	// Reported over 32 KiB after the merge: 413, the earlier patches kept.
	var last int
	for i, p := range append([]string{big}, bigPatches...) {
		st, _, body := d.request(fmt.Sprintf("$iothub/twin/PATCH/properties/reported/?$rid=big%d", i), []byte(p))
		last = st
		if st == 413 {
			if !strings.Contains(string(body), "32768") {
				t.Errorf("413 body %s", body)
			}
			break
		}
	}
	if last != 413 {
		t.Fatalf("no 413 after 40 KB of reported properties (last %d)", last)
	}
	rep := twinDoc(t, n, id)["properties"].(map[string]any)["reported"].(map[string]any)
	if rep["a"] != float64(1) || rep["big"] == nil {
		t.Fatalf("reported after refusals: a=%v big set=%v", rep["a"], rep["big"] != nil)
	}
	// Over the rate: 429 with a body, then service again later. A node of
	// its own with one request per second, so that a slow machine cannot
	// stretch 40 requests over enough time to earn their tokens back.
	n2 := startNode(t, c, func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.TwinRate = 1 })
	dev2 := createDevice(t, n2, "bad-2")
	id2 := Identity{DeviceID: "bad-2"}
	d2 := dialDevice(t, n2.addr, id2, deviceToken(t, id2, dev2.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d2.subscribe(twinResFilter)
	throttled := 0
	start := time.Now()
	for i := range 40 {
		if st, _, body := d2.request(fmt.Sprintf("$iothub/twin/GET/?$rid=r%d", i), nil); st == 429 {
			throttled++
			var eb errorBody
			if json.Unmarshal(body, &eb) != nil || eb.ErrorCode/1000 != 429 {
				t.Fatalf("429 body %s", body)
			}
		}
	}
	elapsed := time.Since(start)
	if throttled == 0 || n2.hub.Stats().Throttled.Load() == 0 {
		t.Fatalf("no 429 over the twin rate (40 requests in %v)", elapsed)
	}
	waitFor(t, 5*time.Second, "rate recovered", func() bool {
		st, _, _ := d2.request("$iothub/twin/GET/?$rid=again", nil)
		return st == 200
	})
	if got, allowed := strings.Count(n2.logs.String(), "reason=ThrottlingException"), 1+int(elapsed/ratelog.DefaultInterval); got < 1 || got > allowed {
		t.Errorf("%d lines logged for %d 429s in %v, want 1 to %d (rate-limited)", got, throttled, elapsed, allowed)
	}
}

// TestHubMethodResponseUnknownRid: a method response nobody waits for is
// dropped, counted and logged (rate-limited), and the device stays
// connected.
func TestHubMethodResponseUnknownRid(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	dev := createDevice(t, n, "m1")
	id := Identity{DeviceID: "m1"}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d.subscribe(methodPostFilter)
	for i := range 50 {
		d.publish1(uint16(i+1), fmt.Sprintf("$iothub/methods/res/200/?$rid=nobody.%d", i), []byte(`{}`))
	}
	d.publish1(99, "$iothub/methods/res/abc/?$rid=x", []byte(`{}`))
	if got := n.hub.Stats().UnknownResponses.Load(); got != 50 {
		t.Fatalf("unknown responses %d", got)
	}
	if got := strings.Count(n.logs.String(), "unknown $rid"); got != 1 {
		t.Errorf("%d log lines for 50 unknown responses, want 1 (rate-limited)", got)
	}
	d.subscribe(twinResFilter)
	if st, _, _ := d.request("$iothub/twin/GET/?$rid=alive", nil); st != 200 {
		t.Fatalf("device after bad responses: GET %d", st)
	}
}

// logMsg and logReason find a text-handler line's message and reason.
var (
	logMsg    = regexp.MustCompile(`msg="([^"]*)"`)
	logReason = regexp.MustCompile(` reason=("[^"]*"|\S+)`)
)

// TestHubBadInputFloodBounded: one bad device and one bad back end repeat
// every kind of bad input 40 times (bad signature, expired token, another
// device's topics, malformed patch, unknown method $rid, stale etag, bad
// API signature): each gets its clear status every time, nothing changes,
// and the log holds at most one line per kind and 10 s (the MQTT server:
// ten per connection), whatever the rate.
func TestHubBadInputFloodBounded(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withHTTPS(t), func(mo *mqtt.Options, _ *bridge.Options, o *Options) {
		o.TwinRate = 100000
		mo.Logger = o.Logger // the MQTT server's refusals count too
	})
	d1 := createDevice(t, n, "flood-1")
	key := d1.Authentication.SymmetricKey.PrimaryKey
	otherKey := createDevice(t, n, "flood-2").Authentication.SymmetricKey.PrimaryKey
	id, id2 := Identity{DeviceID: "flood-1"}, Identity{DeviceID: "flood-2"}
	owner := newAPI(t, n, "owner")
	if st, _, body := owner.do("PATCH", "/twins/flood-2", []byte(`{"tags":{"site":"a"},"properties":{"desired":{"rate":1}}}`), nil); st != 200 {
		t.Fatalf("seed twin: %d %s", st, body)
	}
	before2, before1 := twinDoc(t, n, id2), twinDoc(t, n, id)
	d := dialDevice(t, n.addr, id, deviceToken(t, id, key, time.Hour))
	d.subscribe(twinResFilter)
	badKey := newAPI(t, n, "owner")
	badKey.key = "YW5vdGhlciBrZXkgb2YgdGhlIGh1YiB0ZXN0cy4uLi4="
	expired, _ := SignToken(testHost+"/devices/flood-1", "", key, time.Now().Add(-time.Minute))
	logged := len(n.logs.String())
	start := time.Now()
	const rounds = 40
	for i := range rounds {
		if got := refused(t, n.addr, connectCP(id, deviceToken(t, id, otherKey, time.Hour))); got != packets.ConnectRefusedBadUsernameOrPassword {
			t.Fatalf("bad signature: CONNACK %v", got)
		}
		if got := refused(t, n.addr, connectCP(id, expired)); got != packets.ConnectRefusedBadUsernameOrPassword {
			t.Fatalf("expired token: CONNACK %v", got)
		}
		d.publish1(uint16(3*i+1), "devices/flood-2/messages/events/", []byte("spoof"))
		d.publish1(uint16(3*i+2), "$iothub/methods/res/200/?$rid=nobody."+strconv.Itoa(i), []byte(`{}`))
		if codes := d.subscribe("devices/flood-2/messages/devicebound/#"); codes[0] != 0x80 {
			t.Fatalf("subscribe to another device's C2D: %v", codes)
		}
		if st, _, body := d.request(fmt.Sprintf("$iothub/twin/PATCH/properties/reported/?$rid=m%d", i), []byte(`{"a":`)); st != 400 ||
			!strings.Contains(string(body), "JSON") {
			t.Fatalf("malformed patch: %d %s", st, body)
		}
		if st, _, body := owner.do("PATCH", "/twins/flood-2", []byte(`{"tags":{"site":"b"}}`), map[string]string{"If-Match": `"c3RhbGU="`}); st != 412 ||
			errorCode(t, body) != "PreconditionFailed" {
			t.Fatalf("stale etag: %d %s", st, body)
		}
		if st, _, body := badKey.do("PATCH", "/twins/flood-2", []byte(`{"tags":{"site":"c"}}`), nil); st != 401 ||
			!strings.Contains(string(body), "signature") {
			t.Fatalf("bad API signature: %d %s", st, body)
		}
	}
	elapsed := time.Since(start)
	// Nothing changed: the other device's twin and this one's reported
	// properties are as they were (etag and versions included).
	after2, after1 := twinDoc(t, n, id2), twinDoc(t, n, id)
	for _, k := range []string{"etag", "version", "tags"} {
		if fmt.Sprint(after2[k]) != fmt.Sprint(before2[k]) {
			t.Errorf("flood-2 %s: %v, was %v", k, after2[k], before2[k])
		}
	}
	if fmt.Sprint(after2["properties"].(map[string]any)["desired"]) != fmt.Sprint(before2["properties"].(map[string]any)["desired"]) {
		t.Errorf("flood-2 desired changed: %v", after2["properties"])
	}
	r1, r0 := after1["properties"].(map[string]any)["reported"].(map[string]any), before1["properties"].(map[string]any)["reported"].(map[string]any)
	if r1["$version"] != r0["$version"] {
		t.Errorf("flood-1 reported version %v, was %v", r1["$version"], r0["$version"])
	}
	if got := n.hub.Stats().AuthFailures.Load(); got != 2*rounds {
		t.Errorf("auth failures %d, want %d", got, 2*rounds)
	}
	if got := n.hub.Stats().UnknownResponses.Load(); got != rounds {
		t.Errorf("unknown responses %d, want %d", got, rounds)
	}
	// The log: every kind is there, none more than once per 10 s.
	perKind := map[string]int{}
	for line := range strings.Lines(n.logs.String()[logged:]) {
		if m := logMsg.FindStringSubmatch(line); m != nil {
			k := m[1] + " "
			if r := logReason.FindStringSubmatch(line); r != nil {
				k += r[1]
			}
			perKind[k]++
		}
	}
	allowed := 1 + int(elapsed/ratelog.DefaultInterval)
	for _, want := range []string{"iothub: device refused", "iothub: twin request refused", "iothub: method response for an unknown $rid dropped",
		"iothub: API request refused", "mqtt: publish refused"} {
		found := false
		for k := range perKind {
			found = found || strings.HasPrefix(k, want+" ")
		}
		if !found {
			t.Errorf("no %q line logged", want)
		}
	}
	for k, got := range perKind {
		allowed := allowed
		if strings.HasPrefix(k, "mqtt: ") {
			allowed *= 10 // the MQTT server's own budget: 10 lines per connection and 10 s
		}
		if got > allowed {
			t.Errorf("%d lines of %q for %d bad inputs in %v, want at most %d", got, k, rounds, elapsed.Round(time.Millisecond), allowed)
		}
	}
	t.Logf("%d rounds of bad input in %v: log lines per kind %v", rounds, elapsed.Round(time.Millisecond), perKind)
	if st, _, _ := d.request("$iothub/twin/GET/?$rid=alive", nil); st != 200 {
		t.Fatalf("device after the flood: GET %d", st)
	}
}
