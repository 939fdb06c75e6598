package azurenode

import (
	"strings"
	"testing"
	"time"
)

// TestAzureNodeMethodLimits: IoT Hub's direct method rules as the
// unmodified Node SDKs meet them. A method name IoT Hub refuses (here
// with a space, which the device SDK would get as "my%20method" and
// never dispatch) gets 400 at once, not 504 after the response timeout;
// a device's answer over 128 KB gets 413 MessageTooLarge as soon as it
// comes, one of 128 KB is returned. Both used to pass: the name ran
// into the timeout, the large answer was returned whole.
func TestAzureNodeMethodLimits(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	created := mustOK(t, h.service(t, "create", "limits-dev"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=limits-dev;SharedAccessKey="+key)
	d.await(t, "ready", event("ready"))

	// 400 at once: well inside the 60 s response timeout it would wait.
	res := h.service(t, "invoke", "limits-dev", "my method", `{}`, "60")
	if res["ok"] != false || res["status"] != float64(400) || !strings.Contains(res["message"].(string), "methodName") ||
		res["ms"].(float64) > 30000 {
		t.Fatalf("method name with a space: %v", res)
	}
	if d.within(time.Second, func(ev map[string]any) bool { return ev["event"] == "method" }) {
		t.Fatal("the device got the call with the refused name")
	}

	// The answer is a JSON string: size characters and two quotes.
	res = h.service(t, "invoke", "limits-dev", "dump", `{"size":131071}`, "60")
	if res["ok"] != false || res["status"] != float64(413) || !strings.Contains(res["body"].(string), "ErrorCode:MessageTooLarge") ||
		res["ms"].(float64) > 30000 {
		t.Fatalf("answer over 128 KB: %v", res)
	}
	res = mustOK(t, h.service(t, "invoke", "limits-dev", "dump", `{"size":131070}`, "60"), "answer of 128 KB")
	if result := res["result"].(map[string]any); result["status"] != float64(200) || len(result["payload"].(string)) != 131070 {
		t.Fatalf("answer of 128 KB: status %v", result["status"])
	}
}

// TestAzureNodeModuleIDWithQuestionMark: a module id may start with '?'
// (IoT Hub's rules); the device SDK's user name is then
// "{host}/{deviceId}/?m/?api-version=...", whose module level reads like
// the query: the connection's client id ("{deviceId}/?m") settles it.
// Such a ModuleClient connects, reads its twin, reports, gets desired
// changes and methods. It used to be refused at connect: the user name
// was read as the device's.
func TestAzureNodeModuleIDWithQuestionMark(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	mustOK(t, h.service(t, "create", "qdev"), "create")
	const mid = "?m"
	mod := mustOK(t, h.service(t, "create-module", "qdev", mid), "create module")["module"].(map[string]any)
	mkey := mod["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	m := h.startScript(t, "module.js", "MODULE_CONNECTION_STRING=HostName="+hubHost+";DeviceId=qdev;ModuleId="+mid+";SharedAccessKey="+mkey)
	m.await(t, "the module ready", event("ready"))
	mt := mustOK(t, h.service(t, "get-module-twin", "qdev", mid), "get module twin")["twin"].(map[string]any)
	if mt["connectionState"] != "Connected" || mt["properties"].(map[string]any)["reported"].(map[string]any)["role"] != "sensor" {
		t.Fatalf("module twin: %v", mt)
	}
	mustOK(t, h.service(t, "module-update-desired", "qdev", mid, `{"rate":7}`), "update desired")
	m.await(t, "desired rate 7", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["rate"] == float64(7)
	})
	res := mustOK(t, h.service(t, "invoke-module", "qdev", mid, "ping", `{"n":2}`, "15"), "invoke module")
	if result := res["result"].(map[string]any); result["status"] != float64(201) {
		t.Fatalf("module method: %v", res)
	}
	if tw := mustOK(t, h.service(t, "get-twin", "qdev"), "get twin")["twin"].(map[string]any); tw["connectionState"] != "Disconnected" {
		t.Fatalf("the module's connection was taken for the device's: %v", tw["connectionState"])
	}
}
