package iothub

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/mqtt"
)

// TestHubTwinBadInput: malformed requests and patches that break a rule
// get an error status with an errorCode body (what the SDKs look for), and
// nothing changes; the log lines a device drives are rate-limited.
func TestHubTwinBadInput(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.TwinRate = 20 })
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
	// Over the rate: 429 with a body, then service again later.
	throttled := 0
	for i := range 40 {
		if st, _, _ := d.request(fmt.Sprintf("$iothub/twin/GET/?$rid=r%d", i), nil); st == 429 {
			throttled++
		}
	}
	if throttled == 0 || n.hub.Stats().Throttled.Load() == 0 {
		t.Fatal("no 429 over the twin rate")
	}
	waitFor(t, 5*time.Second, "rate recovered", func() bool {
		st, _, _ := d.request("$iothub/twin/GET/?$rid=again", nil)
		return st == 200
	})
	if got := strings.Count(n.logs.String(), "reason=ThrottlingException"); got != 1 {
		t.Errorf("%d lines logged for a burst of 429s, want 1 (rate-limited)", got)
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
