package iothub

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestHubParseUsername(t *testing.T) {
	for _, tc := range []struct {
		in       string
		host     string
		id       Identity
		ok       bool
		clientID string
	}{
		// The Node SDK's user name (azure-iot-device-mqtt 1.16.4).
		{"hub.example.test/dev-1/?api-version=2021-04-12&DeviceClientType=azure-iot-device%2F1.18.4", "hub.example.test", Identity{"dev-1", ""}, true, "dev-1"},
		{"hub.example.test/dev-1/mod.a/?api-version=2021-04-12", "hub.example.test", Identity{"dev-1", "mod.a"}, true, "dev-1/mod.a"},
		{"hub.example.test/dev-1/api-version=2016-11-14", "hub.example.test", Identity{"dev-1", ""}, true, "dev-1"},
		{"hub.example.test/dev-1", "hub.example.test", Identity{"dev-1", ""}, true, "dev-1"},
		{"alice", "", Identity{}, false, ""},
		{"/dev-1/?api-version=1", "", Identity{}, false, ""},
		{"h/a/b/c/?api-version=1", "", Identity{}, false, ""},
		{"h/bad id/?api-version=1", "", Identity{}, false, ""},
		{"h//?api-version=1", "", Identity{}, false, ""},
		// Ids may hold '?' (IoT Hub's rules): the Node SDK puts it in the
		// user name as it is; the query starts after its own '/'.
		{"hub.example.test/a?b/?api-version=2021-04-12&DeviceClientType=azure-iot-device%2F1.18.4", "hub.example.test", Identity{"a?b", ""}, true, "a?b"},
		{"hub.example.test/?d?/m?/?api-version=2021-04-12", "hub.example.test", Identity{"?d?", "m?"}, true, "?d?/m?"},
		{"hub.example.test/a?b/api-version=2016-11-14", "hub.example.test", Identity{"a?b", ""}, true, "a?b"},
		{"hub.example.test/dev-1?api-version=2016-11-14", "hub.example.test", Identity{"dev-1", ""}, true, "dev-1"},
		{"h/a?b/m/x/?api-version=1", "", Identity{}, false, ""},
	} {
		host, id, ok := ParseUsername(tc.in)
		if ok != tc.ok || host != tc.host || id != tc.id || ok && id.ClientID() != tc.clientID {
			t.Errorf("%q: %q %+v %v", tc.in, host, id, ok)
		}
	}
	// A module id starting with '?' reads as a query without the client
	// id; the connection's client id settles it (and only a path that is
	// the client id followed by the query).
	for _, tc := range []struct {
		in, clientID string
		id           Identity
		ok           bool
	}{
		{"hub.example.test/dev-1/?m/?api-version=2021-04-12&DeviceClientType=azure-iot-device%2F1.18.4", "dev-1/?m", Identity{"dev-1", "?m"}, true},
		{"hub.example.test/dev-1/?m/api-version=2016-11-14", "dev-1/?m", Identity{"dev-1", "?m"}, true},
		{"hub.example.test/?d/?m", "?d/?m", Identity{"?d", "?m"}, true},
		{"hub.example.test/?d/?m/", "?d/?m", Identity{"?d", "?m"}, true},
		{"hub.example.test/dev-1/?api-version=2021-04-12", "dev-1", Identity{"dev-1", ""}, true},
		{"hub.example.test/dev-1/?m/?api-version=2021-04-12", "dev-1", Identity{"dev-1", ""}, true},
		{"hub.example.test/dev-1/m/?api-version=2021-04-12", "dev-1", Identity{"dev-1", "m"}, true},
		{"hub.example.test/dev-1?api-version=2016-11-14", "dev-1", Identity{"dev-1", ""}, true},
		// Not the client id's path: read as before, and then refused for
		// naming another identity than the client id.
		{"hub.example.test/dev-1/?m/x/?api-version=1", "dev-1/?m", Identity{"dev-1", ""}, true},
		{"hub.example.test/bad id/?api-version=1", "bad id", Identity{}, false},
	} {
		host, id, ok := parseUsername(tc.in, tc.clientID)
		if ok != tc.ok || id != tc.id || ok && host != "hub.example.test" {
			t.Errorf("%q as %q: %q %+v %v", tc.in, tc.clientID, host, id, ok)
		}
	}
	if m, ok, err := modelID("hub/d/?m/?api-version=1&model-id=dtmi:a;1", "d/?m"); m != "dtmi:a;1" || !ok || err != nil {
		t.Errorf("model id of module ?m: %q %v %v", m, ok, err)
	}
	if id, ok := ParseClientID("d/m"); !ok || id != (Identity{"d", "m"}) || id.Path() != "/devices/d/modules/m" {
		t.Fatalf("%+v %v", id, ok)
	}
	if _, ok := ParseClientID("d/m/x"); ok {
		t.Fatal("three levels accepted")
	}
}

// TestHubModelID: the IoT Plug and Play model id of a user name, as the
// Node SDK (azure-iot-device-mqtt 1.16.4, not escaped) and others
// (percent-encoded) send it.
func TestHubModelID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok, bad  bool
	}{
		{"hub/dev-1/?api-version=2021-04-12&model-id=dtmi:com:example:Thermostat;1&DeviceClientType=azure-iot-device%2F1.18.4",
			"dtmi:com:example:Thermostat;1", true, false},
		{"hub/dev-1/mod/?api-version=2021-04-12&DeviceClientType=x&model-id=dtmi%3Acom%3Aexample%3AFan%3B2", "dtmi:com:example:Fan;2", true, false},
		{"hub/dev-1/api-version=2020-09-30&model-id=dtmi:a;1", "dtmi:a;1", true, false},
		{"hub/dev-1/?api-version=2021-04-12&DeviceClientType=azure-iot-device%2F1.18.4", "", false, false},
		{"hub/dev-1/?api-version=2021-04-12&model-id=", "", false, false},
		{"hub/dev-1", "", false, false},
		{"hub/dev-1/?model-id=%zz", "", false, true},
		{"hub/a?model-id=x/?api-version=2021-04-12", "", false, false},
		{"hub/a?b/?api-version=2021-04-12&model-id=dtmi:a;1", "dtmi:a;1", true, false},
	} {
		got, ok, err := ModelID(tc.in)
		if got != tc.want || ok != tc.ok || (err != nil) != tc.bad || err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %q %v %v", tc.in, got, ok, err)
		}
	}
}

func TestHubDeviceTopics(t *testing.T) {
	rid, err := requestID("$iothub/twin/GET/?$rid=6ba7b810-9dad")
	if err != nil || rid != "6ba7b810-9dad" {
		t.Fatalf("%q %v", rid, err)
	}
	for _, bad := range []string{"$iothub/twin/GET/", "$iothub/twin/GET/?x=1", "$iothub/twin/GET/?$rid="} {
		if _, err := requestID(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if v, err := versionParam("$iothub/twin/PATCH/properties/reported/?$rid=1&$version=7"); err != nil || v != 7 {
		t.Fatalf("%d %v", v, err)
	}
	if v, err := versionParam("$iothub/twin/PATCH/properties/reported/?$rid=1"); err != nil || v != 0 {
		t.Fatalf("%d %v", v, err)
	}
	if _, err := versionParam("$iothub/twin/PATCH/properties/reported/?$rid=1&$version=x"); !errors.Is(err, ErrBadRequest) {
		t.Fatal(err)
	}
	st, rid, err := methodResponse("$iothub/methods/res/200/?$rid=ab.1f")
	if err != nil || st != 200 || rid != "ab.1f" {
		t.Fatalf("%d %q %v", st, rid, err)
	}
	for _, bad := range []string{"$iothub/methods/res/x/?$rid=1", "$iothub/methods/res/200", "$iothub/methods/res/-1/?$rid=1",
		"$iothub/methods/res/200/?$rod=1"} {
		if _, _, err := methodResponse(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if got := twinResponseTopic(204, "r1", 12); got != "$iothub/twin/res/204/?$rid=r1&$version=12" {
		t.Fatal(got)
	}
	if got := methodRequestTopic("reboot", "ab.2"); got != "$iothub/methods/POST/reboot/?$rid=ab.2" {
		t.Fatal(got)
	}
	// IoT Hub's rule: printable US-ASCII without its separators (the
	// Node SDK would get a space as %20 and never answer).
	for _, name := range []string{"", "a/b", "a+", "x#", "a?b", "tab\t", "my method", "a$b", "f(x)", "<a>", "a@b", "a,b",
		"a;b", "a:b", "a\\b", `a"b`, "[a]", "a=b", "{a}", "caf\u00e9", "a\x7f", strings.Repeat("m", maxMethodNameLen+1)} {
		if err := checkMethodName(name); !errors.Is(err, ErrBadRequest) {
			t.Errorf("method name %q: %v", name, err)
		}
	}
	for _, name := range []string{"reboot", "get_status-2.x", "a!*'|^`~%&", "A", strings.Repeat("m", maxMethodNameLen)} {
		if err := checkMethodName(name); err != nil {
			t.Errorf("method name %q: %v", name, err)
		}
	}
}

func TestHubEventsTopics(t *testing.T) {
	for _, tc := range []struct {
		topic string
		id    Identity
		bag   string
		ok    bool
	}{
		{"devices/d1/messages/events/", Identity{"d1", ""}, "", true},
		{"devices/d1/messages/events", Identity{"d1", ""}, "", true},
		{"devices/d1/messages/events/%24.mid=1&a=b", Identity{"d1", ""}, "%24.mid=1&a=b", true},
		{"devices/d1/modules/m1/messages/events/%24.on=out1/", Identity{"d1", "m1"}, "%24.on=out1", true},
		{"devices/d1/messages/devicebound/x", Identity{}, "", false},
		{"devices/d1/twin", Identity{}, "", false},
		{"other/d1/messages/events/", Identity{}, "", false},
	} {
		id, bag, ok := eventsIdentity(tc.topic)
		if id != tc.id || bag != tc.bag || ok != tc.ok {
			t.Errorf("%q: %+v %q %v", tc.topic, id, bag, ok)
		}
	}
}

// TestHubPropertyBagPinned pins the bag encoding: every byte but
// A-Z a-z 0-9 - _ . ~ escaped, upper-case hex, pairs in order.
func TestHubPropertyBagPinned(t *testing.T) {
	props := []Property{{"$.mid", "m 1"}, {"$.to", "/devices/d1/messages/deviceBound"}, {"color", "red&blue=ok"}, {"ü", "+#"}}
	const want = "%24.mid=m%201&%24.to=%2Fdevices%2Fd1%2Fmessages%2FdeviceBound&color=red%26blue%3Dok&%C3%BC=%2B%23"
	if got := EncodeBag(props); got != want {
		t.Fatalf("bag\n got %s\nwant %s", got, want)
	}
	back, err := DecodeBag(want)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(props) {
		t.Fatalf("decoded %v %v", back, err)
	}
	// Other SDKs: '+' kept, pairs without '=', empty pairs.
	got, err := DecodeBag("a=1+2&flag&&b=")
	if err != nil || fmt.Sprint(got) != fmt.Sprint([]Property{{"a", "1+2"}, {"flag", ""}, {"b", ""}}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"a=%zz", "%zz=1", "=1"} {
		if _, err := DecodeBag(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestHubEventProperties(t *testing.T) {
	p, err := EventProperties(Identity{"d1", "m1"}, "%24.mid=42&%24.ct=application%2Fjson&%24.ce=utf-8&temp=21&KEYS=x&iothub-x=y&%24.zz=q&e=", true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{PropDeviceID: "d1", PropModuleID: "m1", PropMessageSource: "Telemetry", "mqtt-retain": "true",
		"message-id": "42", "content-type": "application/json", "content-encoding": "utf-8", "temp": "21",
		"app-KEYS": "x", "app-iothub-x": "y", "$.zz": "q"}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Fatalf("properties\n got %v\nwant %v", p, want)
	}
	if _, err := EventProperties(Identity{"d1", ""}, "a=%01", false); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("separator byte: %v", err)
	}
}

func TestHubCovers(t *testing.T) {
	for _, tc := range []struct {
		rule, sub string
		want      bool
	}{
		{"$iothub/twin/res/#", "$iothub/twin/res/#", true},
		{"$iothub/twin/res/#", "$iothub/twin/res/200/+", true},
		{"$iothub/twin/res/#", "$iothub/twin/#", false},
		{"$iothub/twin/res/#", "$iothub/+/res/#", false},
		{"devices/d1/messages/devicebound/#", "devices/d1/messages/devicebound/#", true},
		{"devices/d1/messages/devicebound/#", "devices/+/messages/devicebound/#", false},
		{"devices/d1/messages/devicebound/#", "devices/d1/messages/devicebound", true},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
	} {
		if got := covers(tc.rule, tc.sub); got != tc.want {
			t.Errorf("covers(%q, %q) = %v", tc.rule, tc.sub, got)
		}
	}
}

func FuzzHubDeviceTopics(f *testing.F) {
	for _, s := range []string{"devices/d1/messages/events/%24.mid=1&a=b", "$iothub/methods/res/200/?$rid=1",
		"h/d/m/?api-version=1", "a=%zz&&b", "h/d/?m/?api-version=1&model-id=dtmi:a;1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if id, bag, ok := eventsIdentity(s); ok {
			if _, err := EventProperties(id, bag, false); err != nil && !errors.Is(err, ErrBadRequest) {
				t.Fatal(err)
			}
		}
		if props, err := DecodeBag(s); err == nil {
			again, err := DecodeBag(EncodeBag(props))
			if err != nil || fmt.Sprint(again) != fmt.Sprint(props) {
				t.Fatalf("round trip of %q: %v %v", s, again, err)
			}
		}
		_, _, _ = methodResponse(s)
		_, _ = requestID(s)
		_, _ = versionParam(s)
		if m, ok, err := ModelID(s); err != nil && !errors.Is(err, ErrBadRequest) || err == nil && ok == (m == "") {
			t.Fatalf("model id of %q: %q %v %v", s, m, ok, err)
		}
		if _, id, ok := ParseUsername(s); ok {
			if _, ok := ParseClientID(id.ClientID()); !ok {
				t.Fatalf("user name %q gives client id %q that does not parse", s, id.ClientID())
			}
		}
		// With a client id (here the levels between the host and the
		// last '/'): an identity that parses, and a model id as above.
		if _, rest, ok := strings.Cut(s, "/"); ok {
			cid := rest[:max(strings.LastIndex(rest, "/"), 0)]
			if _, id, ok := parseUsername(s, cid); ok {
				if _, ok := ParseClientID(id.ClientID()); !ok {
					t.Fatalf("user name %q for %q gives client id %q that does not parse", s, cid, id.ClientID())
				}
			}
			if m, ok, err := modelID(s, cid); err != nil && !errors.Is(err, ErrBadRequest) || err == nil && ok == (m == "") {
				t.Fatalf("model id of %q for %q: %q %v %v", s, cid, m, ok, err)
			}
		}
	})
}
