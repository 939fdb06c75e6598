package iothub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// withHTTPS gives a node the HTTPS API on 127.0.0.1:0.
func withHTTPS(t testing.TB) nodeConfig {
	cert, key, _ := selfSignedFiles(t, t.TempDir(), testHost, true)
	return func(_ *mqtt.Options, _ *bridge.Options, o *Options) {
		o.HTTPSListen = []string{"127.0.0.1:0"}
		o.TLSCertFile, o.TLSKeyFile = cert, key
	}
}

// errorCode reads the IoT Hub error code of an error body.
func errorCode(t testing.TB, body []byte) string {
	t.Helper()
	var e struct{ Message string }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	if strings.HasPrefix(e.Message, "{") {
		// A direct method's error: a JSON object with a numeric code.
		var inner struct{ ErrorCode int }
		if err := json.Unmarshal([]byte(e.Message), &inner); err != nil {
			t.Fatalf("error body %s: %v", body, err)
		}
		return strconv.Itoa(inner.ErrorCode)
	}
	code, _, _ := strings.Cut(strings.TrimPrefix(e.Message, "ErrorCode:"), ";")
	return code
}

// TestHubRESTRegistryAndTwins: identities, twins with quoted If-Match,
// queries with paging headers, as the service SDKs use them.
func TestHubRESTRegistryAndTwins(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withHTTPS(t))
	a := newAPI(t, n, "owner")
	// PUT creates: 200 (not 201), keys generated for empty ones.
	st, hdr, body := a.do("PUT", "/devices/sensor%2D1?api-version=2021-04-12", []byte(`{"deviceId":"sensor-1","status":"enabled",
		"authentication":{"type":"sas","symmetricKey":{"primaryKey":"","secondaryKey":""}}}`), nil)
	var dev struct {
		DeviceID, Etag string
		Authentication struct{ SymmetricKey struct{ PrimaryKey string } }
	}
	if st != 200 || json.Unmarshal(body, &dev) != nil || dev.DeviceID != "sensor-1" || dev.Authentication.SymmetricKey.PrimaryKey == "" ||
		hdr.Get("ETag") != `"`+dev.Etag+`"` {
		t.Fatalf("create: %d %s", st, body)
	}
	if st, _, body := a.do("PUT", "/devices/sensor-1", []byte(`{"deviceId":"sensor-1"}`), nil); st != 409 || errorCode(t, body) != "DeviceAlreadyExists" {
		t.Fatalf("create again: %d %s", st, body)
	}
	if st, _, body := a.do("PUT", "/devices/sensor-1", []byte(`{"deviceId":"sensor-1","status":"disabled"}`), map[string]string{"If-Match": `"*"`}); st != 200 ||
		!strings.Contains(string(body), `"disabled"`) {
		t.Fatalf("update: %d %s", st, body)
	}
	if st, _, body := a.do("GET", "/devices/nobody?api-version=2021-04-12", nil, nil); st != 404 || errorCode(t, body) != "DeviceNotFound" {
		t.Fatalf("get unknown: %d %s", st, body)
	}
	if st, _, body := a.do("PUT", "/devices/x", []byte(`{"deviceId":`), nil); st != 400 {
		t.Fatalf("malformed body: %d %s", st, body)
	}
	for i := range 5 {
		if st, _, body := a.do("PUT", fmt.Sprintf("/devices/q-%d", i), []byte(`{}`), nil); st != 200 {
			t.Fatalf("create q-%d: %d %s", i, st, body)
		}
	}
	if st, _, body := a.do("PUT", "/devices/q-0/modules/edge", []byte(`{"moduleId":"edge"}`), nil); st != 200 {
		t.Fatalf("module: %d %s", st, body)
	}
	if st, _, body := a.do("GET", "/devices/q-0/modules", nil, nil); st != 200 || !strings.Contains(string(body), `"edge"`) {
		t.Fatalf("modules: %d %s", st, body)
	}

	// Twins: PATCH with the current etag (quoted), then with a stale one.
	st, hdr, body = a.do("GET", "/twins/q-1", nil, nil)
	var tw struct{ Etag string }
	if st != 200 || json.Unmarshal(body, &tw) != nil || tw.Etag == "" || hdr.Get("ETag") != `"`+tw.Etag+`"` {
		t.Fatalf("twin: %d %s", st, body)
	}
	patch := []byte(`{"tags":{"site":"north"},"properties":{"desired":{"rate":5}}}`)
	st, _, body = a.do("PATCH", "/twins/q-1", patch, map[string]string{"If-Match": `"` + tw.Etag + `"`})
	if st != 200 || !strings.Contains(string(body), `"rate":5`) {
		t.Fatalf("patch: %d %s", st, body)
	}
	if st, _, body := a.do("PATCH", "/twins/q-1", []byte(`{"tags":{"site":"south"}}`), map[string]string{"If-Match": `"` + tw.Etag + `"`}); st != 412 ||
		errorCode(t, body) != "PreconditionFailed" {
		t.Fatalf("stale etag: %d %s", st, body)
	}
	if st, _, body := a.do("PATCH", "/twins/q-1", []byte(`{"tags":{"a.b":1}}`), nil); st != 400 {
		t.Fatalf("bad key: %d %s", st, body)
	}
	if st, _, body := a.do("GET", "/twins/q-1", nil, nil); st != 200 || !strings.Contains(string(body), `"north"`) {
		t.Fatalf("after refusals: %d %s", st, body)
	}
	if st, _, body := a.do("PUT", "/twins/q-2", []byte(`{"tags":{"site":"north"}}`), map[string]string{"If-Match": `"*"`}); st != 200 {
		t.Fatalf("replace: %d %s", st, body)
	}

	// Query: pages of 2, then the last page without a continuation.
	q := []byte(`{"query":"SELECT * FROM devices WHERE STARTSWITH(deviceId, 'q-')"}`)
	var ids []string
	cont := ""
	for pages := 0; ; pages++ {
		h := map[string]string{"x-ms-max-item-count": "2"}
		if cont != "" {
			h["x-ms-continuation"] = cont
		}
		st, hdr, body := a.do("POST", "/devices/query?api-version=2021-04-12", q, h)
		var items []struct{ DeviceID string }
		if st != 200 || hdr.Get("x-ms-item-type") != "twin" || json.Unmarshal(body, &items) != nil || len(items) > 2 {
			t.Fatalf("query page: %d %v %s", st, hdr, body)
		}
		for _, it := range items {
			ids = append(ids, it.DeviceID)
		}
		cont = hdr.Get("x-ms-continuation")
		if cont == "" {
			break
		}
		if pages > 5 {
			t.Fatal("too many pages")
		}
	}
	if len(ids) != 5 {
		t.Fatalf("query found %v", ids)
	}
	st, hdr, body = a.do("POST", "/devices/query", []byte(`{"query":"SELECT COUNT() AS n FROM devices WHERE tags.site = 'north'"}`), nil)
	if st != 200 || hdr.Get("x-ms-item-type") != "raw" || string(body) != `[{"n":2}]` {
		t.Fatalf("count: %d %v %s", st, hdr, body)
	}
	// TOP n: the first n in one page (it was refused as a bad query).
	st, hdr, body = a.do("POST", "/devices/query", []byte(`{"query":"SELECT TOP 3 deviceId FROM devices WHERE STARTSWITH(deviceId, 'q-')"}`), nil)
	var top []struct{ DeviceID string }
	if st != 200 || hdr.Get("x-ms-continuation") != "" || json.Unmarshal(body, &top) != nil || len(top) != 3 ||
		!strings.HasPrefix(top[0].DeviceID, "q-") || top[0] == top[1] || top[1] == top[2] || top[0] == top[2] {
		t.Fatalf("top 3: %d %v %s", st, hdr, body)
	}
	// TOP n in pages of the page size asked: 2, then the last 1.
	topQ := []byte(`{"query":"SELECT TOP 3 deviceId FROM devices WHERE STARTSWITH(deviceId, 'q-')"}`)
	st, hdr, body = a.do("POST", "/devices/query", topQ, map[string]string{"x-ms-max-item-count": "2"})
	var top1, top2 []struct{ DeviceID string }
	if st != 200 || hdr.Get("x-ms-continuation") == "" || json.Unmarshal(body, &top1) != nil || len(top1) != 2 {
		t.Fatalf("top 3 in pages of 2, first page: %d %v %s", st, hdr, body)
	}
	st, hdr, body = a.do("POST", "/devices/query", topQ, map[string]string{"x-ms-max-item-count": "2",
		"x-ms-continuation": hdr.Get("x-ms-continuation")})
	if st != 200 || hdr.Get("x-ms-continuation") != "" || json.Unmarshal(body, &top2) != nil || len(top2) != 1 ||
		top2[0] == top1[0] || top2[0] == top1[1] || top1[0] == top1[1] {
		t.Fatalf("top 3 in pages of 2, last page: %d %v %s (first %v)", st, hdr, body, top1)
	}
	for _, bad := range []string{"SELECT TOP 0 * FROM devices", "SELECT TOP x * FROM devices", "SELECT TOP 1001 * FROM devices"} {
		if st, _, body := a.do("POST", "/devices/query", []byte(`{"query":"`+bad+`"}`), nil); st != 400 || !strings.Contains(string(body), "after TOP") {
			t.Fatalf("%s: %d %s", bad, st, body)
		}
	}
	if st, _, body := a.do("POST", "/devices/query", []byte(`{"query":"SELECT * FROM nowhere"}`), nil); st != 400 {
		t.Fatalf("bad query: %d %s", st, body)
	}
	if st, _, _ := a.do("DELETE", "/devices/q-4", nil, map[string]string{"If-Match": `"*"`}); st != 204 {
		t.Fatalf("delete: %d", st)
	}
	if st, _, _ := a.do("GET", "/devices?top=100", nil, nil); st != 200 {
		t.Fatalf("list: %d", st)
	}
}

// TestHubRESTAuth: tokens are checked: signature, expiry, policy,
// permission, host; failures are 401 with IoT Hub's error code, and
// change nothing.
func TestHubRESTAuth(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withHTTPS(t))
	reader := newAPI(t, n, "reader")
	if st, _, body := reader.do("PUT", "/devices/r1", []byte(`{}`), nil); st != 401 || errorCode(t, body) != "IotHubUnauthorizedAccess" ||
		!strings.Contains(string(body), "registryWrite") {
		t.Fatalf("reader writes: %d %s", st, body)
	}
	if st, _, _ := reader.do("GET", "/devices/r1", nil, nil); st != 404 {
		t.Fatalf("reader reads: %d", st)
	}
	bad := newAPI(t, n, "owner")
	bad.key = "YW5vdGhlciBrZXkgb2YgdGhlIGh1YiB0ZXN0cy4uLi4="
	if st, _, body := bad.do("PUT", "/devices/r1", []byte(`{}`), nil); st != 401 || !strings.Contains(string(body), "signature") {
		t.Fatalf("wrong key: %d %s", st, body)
	}
	ghost := newAPI(t, n, "ghost")
	if st, _, _ := ghost.do("GET", "/devices/r1", nil, nil); st != 401 {
		t.Fatalf("unknown policy: %d", st)
	}
	owner := newAPI(t, n, "owner")
	for name, tok := range map[string]string{
		"expired":    mustSign(t, testHost, "owner", time.Now().Add(-time.Minute)),
		"other host": mustSign(t, "other.test", "owner", time.Now().Add(time.Hour)),
		"none":       "",
		"garbage":    "Bearer xyz",
	} {
		req, _ := http.NewRequest("GET", owner.base+"/devices/r1", nil)
		if tok != "" {
			req.Header.Set("Authorization", tok)
		}
		resp, err := owner.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s token: %d", name, resp.StatusCode)
		}
	}
	if st, _, _ := owner.do("GET", "/nothing/here", nil, nil); st != 404 {
		t.Fatalf("unknown path: %d", st)
	}
	if st, _, _ := owner.do("GET", "/devices/r1", nil, nil); st != 404 {
		t.Fatal("the refused writes created r1")
	}
}

func mustSign(t testing.TB, host, policy string, exp time.Time) string {
	t.Helper()
	tok, err := SignToken(host, policy, testPolicyKey, exp)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestHubRESTMethodsAndC2D: a direct method and a cloud-to-device message
// through the API of one node, to a device connected to another.
func TestHubRESTMethodsAndC2D(t *testing.T) {
	c := startTestCluster(t, 1)
	dn := startNode(t, c)
	an := startNode(t, c, withHTTPS(t))
	a := newAPI(t, an, "owner")
	st, _, body := a.do("PUT", "/devices/fan", []byte(`{}`), nil)
	var dev struct {
		Authentication struct{ SymmetricKey struct{ PrimaryKey string } }
	}
	if st != 200 || json.Unmarshal(body, &dev) != nil {
		t.Fatalf("create: %d %s", st, body)
	}
	id := Identity{DeviceID: "fan"}
	d := dialDevice(t, dn.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d.subscribe(methodPostFilter, "devices/fan/messages/devicebound/#")
	go answerMethods(t, d, 1)
	st, _, body = a.do("POST", "/twins/fan/methods?api-version=2021-04-12",
		[]byte(`{"methodName":"spin","responseTimeoutInSeconds":10,"connectTimeoutInSeconds":0,"payload":{"rpm":900}}`), nil)
	if st != 200 || string(body) != `{"status":200,"payload":{"echo":{"rpm":900},"method":"spin"}}` {
		t.Fatalf("invoke: %d %s", st, body)
	}
	if st, _, body := a.do("GET", "/statistics/service?api-version=2021-04-12", nil, nil); st != 200 || string(body) != `{"connectedDeviceCount":1}` {
		t.Fatalf("service statistics: %d %s", st, body)
	}
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/twins/nobody/methods", `{"methodName":"x"}`, 404, "DeviceNotFound"},
		{"/twins/fan/methods", `{"methodName":"a/b"}`, 400, "ArgumentInvalid"},
		{"/twins/fan/methods", `{"methodName":"x","responseTimeoutInSeconds":100000}`, 400, "ArgumentInvalid"},
		{"/twins/fan/methods", `{"methodName":`, 400, "ArgumentInvalid"},
		{"/twins/fan/methods", `{"methodName":"x","responseTimeoutInSeconds":1}`, 504, "504101"},
	} {
		st, _, body := a.do("POST", tc.path, []byte(tc.body), nil)
		if st != tc.status || errorCode(t, body) != tc.code {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, st, body)
		}
	}
	d.expect() // the request that timed out
	st, hdr, _ := a.do("POST", "/devices/fan/messages/devicebound", []byte("hello"),
		map[string]string{"iothub-messageid": "mid-7", "iothub-app-Mode": "fast", "Content-Type": "text/plain"})
	if st != 204 || hdr.Get("iothub-messageid") != "mid-7" {
		t.Fatalf("c2d: %d %v", st, hdr)
	}
	p := d.expect()
	props := c2dProps(t, p.Topic)
	if string(p.Payload) != "hello" || props["$.mid"] != "mid-7" || props["mode"] != "fast" || props["$.ct"] != "text/plain" {
		t.Fatalf("c2d got %s %q", p.Topic, p.Payload)
	}
	if st, _, body := a.do("POST", "/devices/fan/messages/devicebound", make([]byte, DefaultC2DMaxSize+1), nil); st != 413 {
		t.Fatalf("oversized c2d: %d %s", st, body)
	}
	d.Send(&packets.Disconnect{})
}

// FuzzHubRESTRoute: any request path parses to a route or a clear error
// (ErrBadRequest, or not found), and a parsed route's ids, escaped again,
// parse to the same route.
func FuzzHubRESTRoute(f *testing.F) {
	for _, s := range []string{"/devices/d1", "/devices/d%2F1/modules/m1", "/twins/d1/modules/m1/methods", "/devices/query",
		"/devices/d1/messages/deviceBound", "/twins/%zz", "//devices//", "/devices/d1/modules", "/statistics/devices", "/statistics/service"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		rt, err := parseRoute(path)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) && !errors.Is(err, errNotFound) {
				t.Fatalf("%q: %v", path, err)
			}
			return
		}
		if len(permissions(rt, "GET")) == 0 || allowed(rt.kind) == "" {
			t.Fatalf("%q: route %+v without permissions or methods", path, rt)
		}
		var again string
		esc := url.PathEscape
		switch rt.kind {
		case "devices":
			again = "/devices"
		case "query":
			again = "/devices/query"
		case "device":
			again = "/devices/" + esc(rt.deviceID)
		case "modules":
			again = "/devices/" + esc(rt.deviceID) + "/modules"
		case "module":
			again = "/devices/" + esc(rt.deviceID) + "/modules/" + esc(rt.moduleID)
		case "c2d":
			again = "/devices/" + esc(rt.deviceID) + "/messages/devicebound"
		case "twin":
			again = "/twins/" + esc(rt.deviceID)
			if rt.moduleID != "" {
				again += "/modules/" + esc(rt.moduleID)
			}
		case "methods":
			again = "/twins/" + esc(rt.deviceID)
			if rt.moduleID != "" {
				again += "/modules/" + esc(rt.moduleID)
			}
			again += "/methods"
		case "stats":
			again = "/statistics/devices"
		case "servicestats":
			again = "/statistics/service"
		default:
			t.Fatalf("%q: unknown route kind %q", path, rt.kind)
		}
		if back, err := parseRoute(again); err != nil || back != rt {
			t.Fatalf("%q → %+v → %q → %+v %v", path, rt, again, back, err)
		}
	})
}

// TestHubRESTBulkDevices: POST /devices as the service SDKs' addDevices,
// updateDevices and removeDevices send it: every entry applied on its
// own, 200 when all succeeded, 400 with one error per failed entry.
func TestHubRESTBulkDevices(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withHTTPS(t))
	a := newAPI(t, n, "owner")
	emptyKeys := `"authentication":{"type":"sas","symmetricKey":{"primaryKey":"","secondaryKey":""}}`
	bulk := func(body string) (int, bulkResult) {
		t.Helper()
		st, _, b := a.do("POST", "/devices?api-version=2021-04-12", []byte(body), nil)
		var res bulkResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("POST /devices: %d %s", st, b)
		}
		return st, res
	}
	get := func(id string) (int, twincli.Device) {
		t.Helper()
		st, _, b := a.do("GET", "/devices/"+id, nil, nil)
		var d twincli.Device
		_ = json.Unmarshal(b, &d)
		return st, d
	}
	st, res := bulk(`[{"id":"b1","importMode":"create",` + emptyKeys + `},{"id":"b2","importMode":"create",` + emptyKeys + `}]`)
	if st != 200 || !res.IsSuccessful || len(res.Errors) != 0 {
		t.Fatalf("create: %d %+v", st, res)
	}
	_, b1 := get("b1")
	if b1.Authentication == nil || b1.Authentication.SymmetricKey == nil || b1.Authentication.SymmetricKey.PrimaryKey == "" || b1.Status != "enabled" {
		t.Fatalf("b1 after create: %+v", b1)
	}
	key := b1.Authentication.SymmetricKey.PrimaryKey

	// One entry fails, the other is applied.
	st, res = bulk(`[{"id":"b1","importMode":"create"},{"id":"b3","importMode":"Create"}]`)
	if st != 400 || res.IsSuccessful || len(res.Errors) != 1 || res.Errors[0].DeviceID != "b1" || res.Errors[0].ErrorCode != "DeviceAlreadyExists" {
		t.Fatalf("create again: %d %+v", st, res)
	}
	if st, _ := get("b3"); st != 200 {
		t.Fatalf("b3 not created: %d", st)
	}

	// Update (forced) keeps the keys; UpdateIfMatchETag checks the etag.
	st, res = bulk(`[{"id":"b1","importMode":"Update","status":"disabled",` + emptyKeys + `}]`)
	if _, d := get("b1"); st != 200 || d.Status != "disabled" || d.Authentication.SymmetricKey.PrimaryKey != key {
		t.Fatalf("update: %d %+v %+v", st, res, d)
	}
	_, b2 := get("b2")
	st, res = bulk(`[{"id":"b2","importMode":"UpdateIfMatchETag","eTag":"stale","status":"disabled"}]`)
	if st != 400 || len(res.Errors) != 1 || res.Errors[0].ErrorCode != "PreconditionFailed" {
		t.Fatalf("stale etag: %d %+v", st, res)
	}
	st, res = bulk(`[{"id":"b2","importMode":"UpdateIfMatchETag","eTag":"` + b2.Etag + `","status":"disabled"}]`)
	if _, d := get("b2"); st != 200 || d.Status != "disabled" {
		t.Fatalf("update with the etag: %d %+v %+v", st, res, d)
	}

	// Delete; a missing device and an unknown mode are entry errors.
	st, res = bulk(`[{"id":"b1","importMode":"Delete"},{"id":"b2","importMode":"DeleteIfMatchETag","eTag":"stale"},` +
		`{"id":"nobody","importMode":"delete"},{"id":"b3","importMode":"explode"}]`)
	if st != 400 || len(res.Errors) != 3 {
		t.Fatalf("delete: %d %+v", st, res)
	}
	if st, _ := get("b1"); st != 404 {
		t.Fatalf("b1 after delete: %d", st)
	}
	if st, _ := get("b2"); st != 200 {
		t.Fatalf("b2 deleted with a stale etag: %d", st)
	}

	// Malformed and oversized requests change nothing.
	if st, _, _ := a.do("POST", "/devices", []byte(`{"id":"x"}`), nil); st != 400 {
		t.Fatalf("not an array: %d", st)
	}
	many := make([]string, maxBulk+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"id":"m%d","importMode":"create"}`, i)
	}
	if st, _, _ := a.do("POST", "/devices", []byte("["+strings.Join(many, ",")+"]"), nil); st != 400 {
		t.Fatalf("%d entries: %d", len(many), st)
	}
	if st, _ := get("m0"); st != 404 {
		t.Fatalf("m0 created by a refused request: %d", st)
	}
	if st, _, _ := newAPI(t, n, "reader").do("POST", "/devices", []byte(`[{"id":"r1","importMode":"create"}]`), nil); st != 401 {
		t.Fatalf("bulk with registryRead only: %d", st)
	}
}

// TestHubTwinPatchOnlyReported: a back-end PATCH that writes nothing a
// back end may write (only properties.reported, which IoT Hub's service
// API cannot set, or an empty document) answers the twin as it is and
// leaves its version and etag alone. Each bumped the version.
func TestHubTwinPatchOnlyReported(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withHTTPS(t))
	createDevice(t, n, "rep-1")
	a := newAPI(t, n, "owner")
	type twinDoc struct {
		Etag       string
		Version    int64
		Properties struct{ Reported map[string]any }
	}
	get := func() twinDoc {
		st, _, body := a.do("GET", "/twins/rep-1", nil, nil)
		var tw twinDoc
		if st != 200 || json.Unmarshal(body, &tw) != nil {
			t.Fatalf("twin: %d %s", st, body)
		}
		return tw
	}
	before := get()
	for _, patch := range []string{`{"properties":{"reported":{"fw":"2.0"}}}`, `{}`, `{"properties":{}}`} {
		st, hdr, body := a.do("PATCH", "/twins/rep-1", []byte(patch), nil)
		var tw twinDoc
		if st != 200 || json.Unmarshal(body, &tw) != nil || tw.Version != before.Version || tw.Etag != before.Etag ||
			hdr.Get("ETag") != `"`+before.Etag+`"` || tw.Properties.Reported["fw"] != nil {
			t.Fatalf("PATCH %s: %d %s (before: version %d etag %s)", patch, st, body, before.Version, before.Etag)
		}
	}
	if after := get(); after.Version != before.Version || after.Etag != before.Etag {
		t.Fatalf("twin moved: version %d etag %s, was %d %s", after.Version, after.Etag, before.Version, before.Etag)
	}
	// A tag still moves it.
	if st, _, body := a.do("PATCH", "/twins/rep-1", []byte(`{"tags":{"site":"n"}}`), nil); st != 200 {
		t.Fatalf("tag patch: %d %s", st, body)
	}
	if after := get(); after.Version != before.Version+1 {
		t.Fatalf("after a tag: version %d, was %d", after.Version, before.Version)
	}
}
