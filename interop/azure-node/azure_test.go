// Package azurenode drives SmartGo's IoT Hub surface with the unmodified
// Azure IoT SDKs for Node from npm: azure-iot-device 1.18.4 with
// azure-iot-device-mqtt 1.16.4 (device.js, module.js) and azure-iothub 1.16.6
// (service.js), against a `smartgo standalone` process with [iothub]
// enabled.
//
// The SDKs have no port option: devices connect to 8883 and back ends to
// 443 of the host name in their connection string. The test serves both
// on a loopback address of its own (127.0.0.x) and runs Node with
// dnsmap.js preloaded, which resolves the hub's name to it; the hub's
// certificate is signed by a CA the test makes, passed to Node with
// NODE_EXTRA_CA_CERTS. It skips only when node is not installed; missing
// npm packages (npm ci in this folder) or ports it cannot bind fail it.
package azurenode

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge/iothub"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/mqtt/packets"
)

const hubHost = "hub.smartgo.test"

// nodeReady skips the test when node is absent and fails it unless the
// pinned packages are installed.
func nodeReady(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	for pkg, want := range map[string]string{"azure-iot-device": "1.18.4", "azure-iot-device-mqtt": "1.16.4", "azure-iothub": "1.16.6"} {
		data, err := os.ReadFile(filepath.Join("node_modules", pkg, "package.json"))
		if err != nil {
			t.Fatalf("%s is not installed: run npm ci in interop/azure-node (.ci/run does)", pkg)
		}
		var p struct{ Version string }
		if json.Unmarshal(data, &p) != nil || p.Version != want {
			t.Fatalf("%s %s installed, want %s (npm ci)", pkg, p.Version, want)
		}
	}
	return node
}

// hubAddress picks a loopback address whose ports 8883 and 443 are free.
func hubAddress(t *testing.T) string {
	t.Helper()
	for range 20 {
		ip := fmt.Sprintf("127.0.%d.%d", mrand.IntN(250)+1, mrand.IntN(250)+2)
		ok := true
		for _, port := range []string{"8883", "443"} {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				if strings.Contains(err.Error(), "permission denied") {
					t.Fatalf("cannot listen on port %s (the SDKs have no port option; run as root or grant CAP_NET_BIND_SERVICE): %v", port, err)
				}
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return ip
		}
	}
	t.Fatal("no loopback address with ports 8883 and 443 free")
	return ""
}

// pki writes a CA and the hub's server certificate (SAN: the hub's
// name) and returns the CA file and the server's files.
func pki(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "SmartGo test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hubHost}, DNSNames: []string{hubHost},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "hub.crt"), filepath.Join(dir, "hub.key")
	writePEM(t, caFile, "CERTIFICATE", caDER)
	writePEM(t, certFile, "CERTIFICATE", srvDER)
	kd, _ := x509.MarshalECPrivateKey(srvKey)
	writePEM(t, keyFile, "EC PRIVATE KEY", kd)
	return caFile, certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// selfSignedDevice writes a device certificate and key and returns the
// files and the SHA-1 thumbprint.
func selfSignedDevice(t *testing.T, dir, id string) (certFile, keyFile, thumb string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: id},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, id+".crt"), filepath.Join(dir, id+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	kd, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, keyFile, "EC PRIVATE KEY", kd)
	sum := sha1.Sum(der)
	return certFile, keyFile, strings.ToUpper(hex.EncodeToString(sum[:]))
}

// hub is a running `smartgo standalone` with the IoT hub.
type hub struct {
	ip        string
	registry  string
	policyKey string
	caFile    string
	log       string
	bin       string
	args      []string
	logf      *os.File
	cmd       *exec.Cmd
}

// startHub starts `smartgo standalone` with the hub on ip; extra are
// further -set settings.
func startHub(t *testing.T, ip string, extra ...string) *hub {
	t.Helper()
	dir := t.TempDir()
	caFile, certFile, keyFile := pki(t, dir)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	h := &hub{ip: ip, policyKey: base64.StdEncoding.EncodeToString(key), caFile: caFile, log: filepath.Join(dir, "smartgo.log")}
	ports := testnet.FreePorts(t, 3)
	h.registry = fmt.Sprintf("127.0.0.1:%d", ports[0])
	cfg := fmt.Sprintf(`
[bridge]
tls_listen = %q
tls_cert = %q
tls_key = %q

[iothub]
enabled = true
hostname = %q
https_listen = %q

[[iothub.policy]]
name = "iothubowner"
key = %q
permissions = ["registryRead", "registryWrite", "serviceConnect"]
`, net.JoinHostPort(ip, "8883"), certFile, keyFile, hubHost, net.JoinHostPort(ip, "443"), h.policyKey)
	cfgFile := filepath.Join(dir, "smartgo.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h.bin = testnet.SmartgoBinary(t, filepath.Join("..", ".."))
	h.args = []string{"standalone", "-c", cfgFile, "-data", filepath.Join(dir, "data"),
		"-set", "registry.listen=" + h.registry, "-set", fmt.Sprintf("broker.listen=127.0.0.1:%d", ports[1]),
		"-set", fmt.Sprintf("bridge.listen=127.0.0.1:%d", ports[2]), "-set", "console.listen=", "-set", "store.segment_size=64MiB"}
	for _, e := range extra {
		h.args = append(h.args, "-set", e)
	}
	logf, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	h.logf = logf
	t.Cleanup(func() {
		h.stop(t)
		if t.Failed() {
			data, _ := os.ReadFile(h.log)
			t.Logf("smartgo log:\n%s", lastLines(string(data), 200))
		}
		logf.Close()
	})
	h.run(t)
	return h
}

// run starts the process and waits until the hub has started.
func (h *hub) run(t *testing.T) {
	t.Helper()
	start, _ := h.logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(h.bin, h.args...)
	cmd.Stdout, cmd.Stderr = h.logf, h.logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.cmd = cmd
	waitFor(t, 60*time.Second, "the IoT hub to start", func() bool {
		data, _ := os.ReadFile(h.log)
		data = data[min(int(start), len(data)):]
		if strings.Contains(string(data), "level=ERROR") {
			t.Fatalf("smartgo failed:\n%s", data)
		}
		return strings.Contains(string(data), "iothub started")
	})
}

// stop ends the process with SIGINT (it must exit cleanly).
func (h *hub) stop(t *testing.T) {
	if h.cmd == nil {
		return
	}
	cmd := h.cmd
	h.cmd = nil
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("smartgo standalone exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Error("smartgo standalone did not stop within 20 s of SIGINT")
	}
}

// crash kills the process with SIGKILL.
func (h *hub) crash(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	h.cmd = nil
}

func (h *hub) serviceConnectionString() string {
	return "HostName=" + hubHost + ";SharedAccessKeyName=iothubowner;SharedAccessKey=" + h.policyKey
}

// nodeEnv is the environment of the Node processes.
func (h *hub) nodeEnv(extra ...string) []string {
	dnsmap, _ := filepath.Abs("dnsmap.js")
	env := append(os.Environ(), "NODE_EXTRA_CA_CERTS="+h.caFile, "NODE_OPTIONS=--require "+dnsmap,
		"SMARTGO_HUB_HOST="+hubHost, "SMARTGO_HUB_IP="+h.ip, "SERVICE_CONNECTION_STRING="+h.serviceConnectionString())
	return append(env, extra...)
}

// service runs one service.js command and returns its JSON answer.
func (h *hub) service(t *testing.T, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"service.js"}, args...)...)
	cmd.Env = h.nodeEnv()
	out, err := cmd.Output()
	var res map[string]any
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("service.js %v: %v %s %s", args, err, out, stderr)
	}
	return res
}

// mustOK fails unless a service.js answer is ok.
func mustOK(t *testing.T, res map[string]any, what string) map[string]any {
	t.Helper()
	if res["ok"] != true {
		t.Fatalf("%s: %v", what, res)
	}
	return res
}

// device is a running device.js.
type device struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan map[string]any
	mu     sync.Mutex
	seen   []map[string]any
}

func (h *hub) startDevice(t *testing.T, connectionString string, extra ...string) *device {
	t.Helper()
	return h.startScript(t, "device.js", append([]string{"DEVICE_CONNECTION_STRING=" + connectionString}, extra...)...)
}

// startScript runs a device-side script (device.js, module.js) with env.
func (h *hub) startScript(t *testing.T, script string, env ...string) *device {
	t.Helper()
	cmd := exec.Command("node", script)
	cmd.Env = h.nodeEnv(env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &device{cmd: cmd, stdin: stdin, events: make(chan map[string]any, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				d.mu.Lock()
				d.seen = append(d.seen, ev)
				d.mu.Unlock()
				d.events <- ev
			}
		}
		close(d.events)
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			d.mu.Lock()
			t.Logf("device events: %v\nstderr: %s", d.seen, lastLines(stderr.String(), 50))
			d.mu.Unlock()
		}
	})
	return d
}

// await returns the next event for which match is true, failing on an
// error event or after the timeout.
func (d *device) await(t *testing.T, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-d.events:
			if !ok {
				t.Fatalf("device.js ended while waiting for %s", what)
			}
			if ev["event"] == "error" && ev["what"] != "client" {
				t.Fatalf("device.js error while waiting for %s: %v", what, ev)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// within reports whether an event matching comes within d.
func (d *device) within(dur time.Duration, match func(map[string]any) bool) bool {
	timeout := time.After(dur)
	for {
		select {
		case ev, ok := <-d.events:
			if !ok {
				return false
			}
			if match(ev) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func event(name string) func(map[string]any) bool {
	return func(ev map[string]any) bool { return ev["event"] == name }
}

// TestAzureNodeSDKs is the end-to-end run: identities and twins from the
// service SDK, a device SDK device with twin, reported properties, desired
// changes (also after its connection was taken away and restored), a
// direct method, cloud-to-device messages and telemetry, an X.509 device,
// and a module (ModuleClient) with its own twin.
func TestAzureNodeSDKs(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))

	// Service SDK: create devices (PUT answers 200; keys generated).
	created := mustOK(t, h.service(t, "create", "sdk-dev-1"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	if key == "" {
		t.Fatalf("no key: %v", created)
	}
	keys := map[int]string{}
	for i := 2; i <= 4; i++ {
		dev := mustOK(t, h.service(t, "create", fmt.Sprintf("sdk-dev-%d", i)), "create")["device"].(map[string]any)
		keys[i] = dev["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	}
	if res := h.service(t, "create", "sdk-dev-1"); res["ok"] != false || res["status"] != float64(409) {
		t.Fatalf("second create: %v", res)
	}

	// Device SDK: connect, read the twin, report, send telemetry.
	devCS := "HostName=" + hubHost + ";DeviceId=sdk-dev-1;SharedAccessKey=" + key
	d := h.startDevice(t, devCS)
	twin := d.await(t, "the twin", event("twin"))
	if twin["desired"].(map[string]any)["$version"] != float64(1) {
		t.Fatalf("twin %v", twin)
	}
	d.await(t, "ready", event("ready"))
	tw := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any)
	rep := tw["properties"].(map[string]any)["reported"].(map[string]any)
	if rep["firmware"] != "1.2.3" || tw["connectionState"] != "Connected" {
		t.Fatalf("twin after report: %v", tw)
	}

	// Desired update with the current etag reaches the device.
	mustOK(t, h.service(t, "update-desired", "sdk-dev-1", `{"rate":5}`), "update desired")
	d.await(t, "desired rate 5", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["rate"] == float64(5)
	})
	// A stale etag: 412, the SDK's InvalidEtagError; nothing changed.
	stale := mustOK(t, h.service(t, "stale-update", "sdk-dev-1", `{"a":1}`, `{"b":2}`), "stale update")
	second := stale["second"].(map[string]any)
	if stale["secondUpdated"] != false || second["status"] != float64(412) || second["error"] != "InvalidEtagError" {
		t.Fatalf("stale etag: %v", stale)
	}
	desired := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any)["properties"].(map[string]any)["desired"].(map[string]any)
	if desired["a"] != float64(1) || desired["b"] != nil {
		t.Fatalf("desired after the stale update: %v", desired)
	}

	// Bulk registry operations (addDevices, removeDevices): the devices
	// come and go with their keys generated.
	if res := mustOK(t, h.service(t, "add-devices", "bulk-1", "bulk-2"), "add devices"); res["result"].(map[string]any)["isSuccessful"] != true {
		t.Fatalf("add devices: %v", res)
	}
	bulk := mustOK(t, h.service(t, "get", "bulk-2"), "get bulk-2")["device"].(map[string]any)
	if bulk["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"] == "" {
		t.Fatalf("bulk-2 without a key: %v", bulk)
	}
	if res := h.service(t, "add-devices", "bulk-2", "bulk-3"); res["ok"] != false || res["status"] != float64(400) {
		t.Fatalf("add an existing device: %v", res)
	}
	mustOK(t, h.service(t, "remove-devices", "bulk-1", "bulk-2", "bulk-3"), "remove devices")
	if res := h.service(t, "get", "bulk-3"); res["status"] != float64(404) || res["error"] != "DeviceNotFoundError" {
		t.Fatalf("bulk-3 after remove: %v", res)
	}

	// Query with pages of 2 (x-ms-continuation), read as twins.
	q := mustOK(t, h.service(t, "query", "SELECT * FROM devices WHERE STARTSWITH(deviceId, 'sdk-dev-')", "2"), "query")
	if q["pages"].(float64) < 2 || len(q["ids"].([]any)) != 4 {
		t.Fatalf("query: %v", q)
	}

	// Direct method through the service SDK.
	inv := mustOK(t, h.service(t, "invoke", "sdk-dev-1", "reboot", `{"delay":2}`, "15"), "invoke")
	result := inv["result"].(map[string]any)
	payload := result["payload"].(map[string]any)
	if result["status"] != float64(200) || payload["rebooted"] != true {
		t.Fatalf("invoke: %v", inv)
	}
	d.await(t, "the method call", event("method"))
	if res := h.service(t, "invoke", "sdk-dev-2", "reboot", `{}`, "5"); res["ok"] != false || res["status"] != float64(404) {
		t.Fatalf("invoke an offline device: %v", res)
	}

	// Cloud-to-device through SmartGo's HTTPS API.
	h.sendC2D(t, "sdk-dev-1", "turn on", map[string]string{"iothub-messageid": "c2d-1", "iothub-app-color": "red"})
	c2d := d.await(t, "the C2D message", event("c2d"))
	if c2d["data"] != "turn on" || c2d["messageId"] != "c2d-1" || !strings.Contains(fmt.Sprint(c2d["properties"]), "color") {
		t.Fatalf("c2d: %v", c2d)
	}

	// A cloud-to-device message for a device that has never connected
	// waits for its first connect.
	h.sendC2D(t, "sdk-dev-3", "first boot", map[string]string{"iothub-messageid": "c2d-boot"})
	d3 := h.startDevice(t, "HostName="+hubHost+";DeviceId=sdk-dev-3;SharedAccessKey="+keys[3])
	if c2d := d3.await(t, "the C2D message sent before the first connect", event("c2d")); c2d["data"] != "first boot" || c2d["messageId"] != "c2d-boot" {
		t.Fatalf("c2d before the first connect: %v", c2d)
	}

	// Telemetry reached the events topic with its properties.
	h.expectTelemetry(t, "sdk-dev-1", "telemetry-1", "celsius")

	// Reconnect: another connection takes the device's session and leaves;
	// the SDK reconnects (clean session 0, without subscribing again) and
	// still gets desired changes.
	h.takeOver(t, "sdk-dev-1", key)
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatal("no desired change reached the device after its reconnect")
		}
		rate := 100 + i
		mustOK(t, h.service(t, "update-desired", "sdk-dev-1", fmt.Sprintf(`{"rate":%d}`, rate)), "update desired")
		if d.within(2*time.Second, func(ev map[string]any) bool {
			delta, _ := ev["delta"].(map[string]any)
			return ev["event"] == "desired" && delta["rate"] == float64(rate)
		}) {
			t.Logf("desired change %d reached the device after its reconnect", i+1)
			break
		}
	}
	if tw := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any); tw["connectionState"] != "Connected" {
		t.Fatalf("state after reconnect: %v", tw["connectionState"])
	}

	// An X.509 device (self-signed, thumbprint registered).
	certFile, keyFile, thumb := selfSignedDevice(t, t.TempDir(), "sdk-x509")
	mustOK(t, h.service(t, "create-x509", "sdk-x509", thumb), "create x509")
	x := h.startDevice(t, "HostName="+hubHost+";DeviceId=sdk-x509;x509=true", "DEVICE_CERT="+certFile, "DEVICE_KEY="+keyFile)
	x.await(t, "the X.509 device ready", event("ready"))
	// Disabled, it loses its connection and the SDK's attempts to connect
	// again are refused (CONNACK 5; the SDK keeps retrying, as against
	// IoT Hub): the twin says Disconnected.
	mustOK(t, h.service(t, "disable", "sdk-x509"), "disable")
	waitFor(t, 60*time.Second, "the disabled device to be disconnected", func() bool {
		return mustOK(t, h.service(t, "get-twin", "sdk-x509"), "get twin")["twin"].(map[string]any)["connectionState"] == "Disconnected"
	})
	waitFor(t, 30*time.Second, "the disabled device's refused reconnect", func() bool {
		data, _ := os.ReadFile(h.log)
		return strings.Contains(string(data), `device=sdk-x509`) && strings.Contains(string(data), "sdk-x509 is disabled")
	})

	// A module of sdk-dev-1 (ModuleClient): its own twin, reported and
	// desired, beside the device's.
	mod := mustOK(t, h.service(t, "create-module", "sdk-dev-1", "sensor"), "create module")["module"].(map[string]any)
	mkey := mod["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	m := h.startScript(t, "module.js", "MODULE_CONNECTION_STRING=HostName="+hubHost+";DeviceId=sdk-dev-1;ModuleId=sensor;SharedAccessKey="+mkey)
	if mt := m.await(t, "the module twin", event("twin")); mt["desired"].(map[string]any)["$version"] != float64(1) {
		t.Fatalf("module twin %v", mt)
	}
	m.await(t, "the module ready", event("ready"))
	mtw := mustOK(t, h.service(t, "get-module-twin", "sdk-dev-1", "sensor"), "get module twin")["twin"].(map[string]any)
	if mtw["moduleId"] != "sensor" || mtw["properties"].(map[string]any)["reported"].(map[string]any)["role"] != "sensor" {
		t.Fatalf("module twin after its report: %v", mtw)
	}
	mustOK(t, h.service(t, "module-update-desired", "sdk-dev-1", "sensor", `{"interval":60}`), "module desired")
	m.await(t, "the module's desired interval 60", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["interval"] == float64(60)
	})
	devTwin := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any)
	if devTwin["properties"].(map[string]any)["reported"].(map[string]any)["role"] != nil {
		t.Fatalf("the module's report reached the device twin: %v", devTwin["properties"])
	}
}

// sendC2D posts a cloud-to-device message to SmartGo's HTTPS API and
// requires 204.
func (h *hub) sendC2D(t *testing.T, id, body string, hdr map[string]string) {
	t.Helper()
	if st, code, _ := h.postC2D(t, id, body, hdr); st != 204 {
		t.Fatalf("C2D send: %d %s", st, code)
	}
}

// postC2D posts a cloud-to-device message to SmartGo's HTTPS API and
// returns the status, the iothub-errorcode header and the body.
func (h *hub) postC2D(t *testing.T, id, body string, hdr map[string]string) (int, string, string) {
	t.Helper()
	pool := x509.NewCertPool()
	data, _ := os.ReadFile(h.caFile)
	pool.AppendCertsFromPEM(data)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: hubHost, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(h.ip, "443"))
		}}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest("POST", "https://"+hubHost+"/devices/"+id+"/messages/devicebound?api-version=2021-04-12", strings.NewReader(body))
	tok, err := iothub.SignToken(hubHost, "iothubowner", h.policyKey, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", tok)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("iothub-errorcode"), string(b)
}

// expectTelemetry reads the events topic for the device's message and
// returns its properties.
func (h *hub) expectTelemetry(t *testing.T, id, messageID, unit string) map[string]string {
	t.Helper()
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: []string{h.registry}}, Group: "AZURE_NODE_TEST", From: client.ConsumeFromFirst,
		PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	qs, err := pc.Queues(ctx, iothub.DefaultEventsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		msgs, err := pc.Poll(ctx)
		if err != nil {
			t.Fatalf("telemetry not found: %v", err)
		}
		for _, m := range msgs {
			p := m.Properties
			if p[iothub.PropDeviceID] == id && p["message-id"] == messageID {
				if p["unit"] != unit || !strings.Contains(string(m.Body), "temperature") {
					t.Fatalf("telemetry %v %s", p, m.Body)
				}
				return p
			}
		}
	}
}

// takeOver connects as the device over TLS (its session), then leaves:
// the SDK's connection is closed by the takeover.
func (h *hub) takeOver(t *testing.T, id, key string) {
	t.Helper()
	pool := x509.NewCertPool()
	data, _ := os.ReadFile(h.caFile)
	pool.AppendCertsFromPEM(data)
	nc, err := tls.Dial("tcp", net.JoinHostPort(h.ip, "8883"), &tls.Config{RootCAs: pool, ServerName: hubHost, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tok, err := iothub.SignToken(hubHost+"/devices/"+id, "", key, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cp := &packets.Connect{ClientID: id, KeepAlive: 60, UsernameFlag: true, Username: hubHost + "/" + id + "/?api-version=2021-04-12",
		PasswordFlag: true, Password: []byte(tok)}
	enc, err := packets.AppendPacket(nil, cp, packets.Version311)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(enc); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, buf); err != nil || buf[0] != 0x20 || buf[3] != 0 {
		t.Fatalf("takeover CONNACK %x %v", buf, err)
	}
	if !(buf[2] == 1) {
		t.Fatalf("takeover found no session (CONNACK %x)", buf)
	}
	disc, _ := packets.AppendPacket(nil, &packets.Disconnect{}, packets.Version311)
	_, _ = nc.Write(disc)
}

func waitFor(t *testing.T, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop closes the script's stdin, on which it closes its client, and
// waits for it to end.
func (d *device) stop(t *testing.T) {
	t.Helper()
	d.stdin.Close()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-d.events:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the script did not end within 30 s of closing its stdin")
		}
	}
}

// kill ends the script's process with SIGKILL (no MQTT DISCONNECT).
func (d *device) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
}

// TestAzureNodeConnectionStateAfterCrash: a device SDK client is connected
// when `smartgo standalone` is SIGKILLed and is gone when it comes back;
// the node that held the connection recorded nothing, yet the twin's
// connectionState becomes Disconnected, and a direct method to the
// device answers 404 at once.
func TestAzureNodeConnectionStateAfterCrash(t *testing.T) {
	nodeReady(t)
	// A long ack wait (for a device recorded connected elsewhere) keeps
	// "at once" apart from it however loaded the machine.
	h := startHub(t, hubAddress(t), "bridge.heartbeat_interval=1s", "iothub.method_ack_timeout=15s")
	created := mustOK(t, h.service(t, "create", "crash-dev"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=crash-dev;SharedAccessKey="+key)
	d.await(t, "ready", event("ready"))
	state := func() any {
		return mustOK(t, h.service(t, "get-twin", "crash-dev"), "get twin")["twin"].(map[string]any)["connectionState"]
	}
	if s := state(); s != "Connected" {
		t.Fatalf("connectionState %v while connected", s)
	}
	h.crash(t)
	d.kill(t)
	h.run(t)
	waitFor(t, 90*time.Second, "the twin of the crashed node's device to say Disconnected", func() bool { return state() == "Disconnected" })
	// A direct method to it does not wait for a node to answer.
	res := h.service(t, "invoke", "crash-dev", "reboot", `{}`, "30")
	methodFailure(t, res, 404, 404103)
	if ms := res["ms"].(float64); ms > 7500 {
		t.Errorf("invoke the crashed node's device: 404 after %v ms", ms)
	}
}

// TestAzureNodeDisabledDeviceModules: a ModuleClient (unmodified device
// SDK) of a device that the service SDK disables loses its connection and
// its reconnects are refused, as IoT Hub refuses the modules of a
// disabled device; enabled again, the SDK's own retries get it back and it
// gets desired changes again. The registry's statistics count the device
// as enabled, then disabled.
func TestAzureNodeDisabledDeviceModules(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	mustOK(t, h.service(t, "create", "dm-dev"), "create")
	mod := mustOK(t, h.service(t, "create-module", "dm-dev", "sensor"), "create module")["module"].(map[string]any)
	mkey := mod["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	m := h.startScript(t, "module.js", "MODULE_CONNECTION_STRING=HostName="+hubHost+";DeviceId=dm-dev;ModuleId=sensor;SharedAccessKey="+mkey)
	m.await(t, "the module ready", event("ready"))
	state := func() any {
		return mustOK(t, h.service(t, "get-module-twin", "dm-dev", "sensor"), "get module twin")["twin"].(map[string]any)["connectionState"]
	}
	if s := state(); s != "Connected" {
		t.Fatalf("module connectionState %v while connected", s)
	}

	// Registry.getRegistryStatistics counts devices (not modules) by status.
	stats := func() map[string]any { return mustOK(t, h.service(t, "stats"), "statistics")["stats"].(map[string]any) }
	if st := stats(); st["totalDeviceCount"] != float64(1) || st["enabledDeviceCount"] != float64(1) || st["disabledDeviceCount"] != float64(0) {
		t.Fatalf("statistics with dm-dev enabled: %v", st)
	}

	mustOK(t, h.service(t, "disable", "dm-dev"), "disable")
	if st := stats(); st["totalDeviceCount"] != float64(1) || st["enabledDeviceCount"] != float64(0) || st["disabledDeviceCount"] != float64(1) {
		t.Fatalf("statistics with dm-dev disabled: %v", st)
	}
	waitFor(t, 60*time.Second, "the disabled device's module to be disconnected", func() bool { return state() == "Disconnected" })
	waitFor(t, 60*time.Second, "the module's refused reconnect", func() bool {
		data, _ := os.ReadFile(h.log)
		return strings.Contains(string(data), "module dm-dev/sensor: device dm-dev is disabled")
	})

	mustOK(t, h.service(t, "enable", "dm-dev"), "enable")
	waitFor(t, 90*time.Second, "the module to connect again", func() bool { return state() == "Connected" })
	mustOK(t, h.service(t, "module-update-desired", "dm-dev", "sensor", `{"interval":7}`), "module desired")
	m.await(t, "the module's desired interval 7 after the enable", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["interval"] == float64(7)
	})
}

// methodFailure checks a failed invoke of service.js: the SDK saw status
// with IoT Hub's method error body (Message holding a JSON object whose
// errorCode is code).
func methodFailure(t *testing.T, res map[string]any, status, code float64) map[string]any {
	t.Helper()
	if res["ok"] != false || res["status"] != status {
		t.Fatalf("invoke: want status %v, got %v", status, res)
	}
	var outer struct{ Message string }
	var inner map[string]any
	body, _ := res["body"].(string)
	if json.Unmarshal([]byte(body), &outer) != nil || json.Unmarshal([]byte(outer.Message), &inner) != nil || inner["errorCode"] != code {
		t.Fatalf("invoke: want errorCode %v in the body, got %v", code, res)
	}
	return inner
}

// TestAzureNodeMethodOfflineDevice: the service SDK's invokeDeviceMethod
// on a device that is not connected gets 404 (errorCode 404103) at once,
// or after connectTimeoutInSeconds when it gives one; a device SDK client
// that connects while a call with a connect timeout waits answers it.
func TestAzureNodeMethodOfflineDevice(t *testing.T) {
	nodeReady(t)
	// A long ack wait (for a device recorded connected elsewhere) keeps
	// "at once" apart from it however loaded the machine.
	h := startHub(t, hubAddress(t), "iothub.method_ack_timeout=15s")
	created := mustOK(t, h.service(t, "create", "nap-dev"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)

	// No connect timeout (absent, then 0): 404 at once, not after the
	// 15 s ack wait.
	for _, args := range [][]string{{"invoke", "nap-dev", "reboot", `{}`, "30"}, {"invoke", "nap-dev", "reboot", `{}`, "30", "0"}} {
		res := h.service(t, args...)
		inner := methodFailure(t, res, 404, 404103)
		if ms := res["ms"].(float64); ms > 7500 {
			t.Errorf("%v: 404 after %v ms", args, ms)
		}
		if info, _ := inner["info"].(map[string]any); info["timeout"] != "00:00:00" {
			t.Errorf("%v: info %v", args, inner)
		}
	}
	// A connect timeout of 2 s: 404 after it.
	res := h.service(t, "invoke", "nap-dev", "reboot", `{}`, "30", "2")
	methodFailure(t, res, 404, 404103)
	if ms := res["ms"].(float64); ms < 2000 {
		t.Errorf("connect timeout 2 s: 404 after %v ms", ms)
	}

	// The device connects while a call with a 60 s connect timeout waits.
	// service.js writes "calling" to stderr as it sends the request; the
	// device SDK takes far longer to start and connect than the request
	// takes to arrive.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "service.js", "invoke", "nap-dev", "reboot", `{"when":"now"}`, "30", "60")
	cmd.Env = h.nodeEnv()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	calling := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if sc.Text() == "calling" {
				calling <- true
			}
		}
		close(calling)
	}()
	if !<-calling {
		t.Fatal("service.js ended without calling")
	}
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=nap-dev;SharedAccessKey="+key)
	d.await(t, "the waiting method call", event("method"))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("service.js: %v %s", err, stdout.String())
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("service.js: %v %s", err, stdout.String())
	}
	t.Logf("the call waited %v ms for the device", res["ms"])
	result, _ := res["result"].(map[string]any)
	if res["ok"] != true || result["status"] != float64(200) || result["payload"].(map[string]any)["rebooted"] != true {
		t.Fatalf("the call that waited for the device: %v", res)
	}

	// A method the device does not answer: 504 (errorCode 504101,
	// GatewayTimeoutError) after the response timeout, not the SDK's own
	// timer.
	res = h.service(t, "invoke", "nap-dev", "no-such-method", `{}`, "2")
	if inner := methodFailure(t, res, 504, 504101); res["error"] != "GatewayTimeoutError" || res["ms"].(float64) < 2000 ||
		inner["info"].(map[string]any)["timeout"] != "00:00:02" {
		t.Fatalf("unanswered method: %v %v", res, inner)
	}
}

// TestAzureNodePnPModelID: a device SDK client (and a ModuleClient) that
// sets an IoT Plug and Play model id (setOptions({modelId})) before it
// connects has it as its twin's modelId for the service SDK
// (Registry.getTwin, getModuleTwin); a connection that announces none
// keeps the last one, one announcing another replaces it. Its telemetry
// carries the model id (dt-dataschema).
func TestAzureNodePnPModelID(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	created := mustOK(t, h.service(t, "create", "pnp-dev"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	cs := "DEVICE_CONNECTION_STRING=HostName=" + hubHost + ";DeviceId=pnp-dev;SharedAccessKey=" + key
	twin := func() map[string]any {
		return mustOK(t, h.service(t, "get-twin", "pnp-dev"), "get twin")["twin"].(map[string]any)
	}
	if m := twin()["modelId"]; m != "" {
		t.Fatalf("modelId before any connect: %v", m)
	}
	for _, step := range []struct{ announce, want string }{
		{"dtmi:com:example:Thermostat;1", "dtmi:com:example:Thermostat;1"},
		{"", "dtmi:com:example:Thermostat;1"},
		{"dtmi:com:example:Thermostat;2", "dtmi:com:example:Thermostat;2"},
	} {
		d := h.startScript(t, "device.js", cs, "MODEL_ID="+step.announce)
		d.await(t, "ready", event("ready"))
		if tw := twin(); tw["modelId"] != step.want || tw["connectionState"] != "Connected" {
			t.Fatalf("announcing %q: modelId %v (%v), want %q", step.announce, tw["modelId"], tw["connectionState"], step.want)
		}
		if step.announce == "dtmi:com:example:Thermostat;1" {
			// Its telemetry carries the model id, as IoT Hub stamps it.
			if p := h.expectTelemetry(t, "pnp-dev", "telemetry-1", "celsius"); p["dt-dataschema"] != step.announce {
				t.Fatalf("telemetry of the PnP device: %v", p)
			}
		}
		d.stop(t)
		waitFor(t, 30*time.Second, "the device disconnected", func() bool { return twin()["connectionState"] == "Disconnected" })
	}

	mod := mustOK(t, h.service(t, "create-module", "pnp-dev", "fan"), "create module")["module"].(map[string]any)
	mkey := mod["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	m := h.startScript(t, "module.js", "MODULE_CONNECTION_STRING=HostName="+hubHost+";DeviceId=pnp-dev;ModuleId=fan;SharedAccessKey="+mkey,
		"MODEL_ID=dtmi:com:example:Fan;1")
	m.await(t, "the module ready", event("ready"))
	mt := mustOK(t, h.service(t, "get-module-twin", "pnp-dev", "fan"), "get module twin")["twin"].(map[string]any)
	if mt["modelId"] != "dtmi:com:example:Fan;1" {
		t.Fatalf("module twin modelId %v", mt["modelId"])
	}
	if tw := twin(); tw["modelId"] != "dtmi:com:example:Thermostat;2" {
		t.Fatalf("the module's model id reached the device twin: %v", tw["modelId"])
	}

	// A direct method to the module (invokeDeviceMethod with a module id,
	// ModuleClient.onMethod), then to a module of the device that is not
	// connected: 404103 at once.
	res := mustOK(t, h.service(t, "invoke-module", "pnp-dev", "fan", "ping", `{"n":1}`, "15"), "invoke module")
	result := res["result"].(map[string]any)
	if result["status"] != float64(201) || fmt.Sprint(result["payload"]) != "map[pong:map[n:1]]" {
		t.Fatalf("module method: %v", res)
	}
	m.await(t, "the module's method call", event("method"))
	mustOK(t, h.service(t, "create-module", "pnp-dev", "idle"), "create module")
	methodFailure(t, h.service(t, "invoke-module", "pnp-dev", "idle", "ping", `{}`, "15"), 404, 404103)
}

// TestAzureNodeDeviceIDWithQuestionMark: IoT Hub's device ids may hold
// '?', which the device SDK puts into its MQTT user name as it is
// ("{host}/a?b/?api-version=..."); such a device connects, reads its
// twin, reports and gets desired changes and methods. It used to be
// refused: the user name was cut at its first '?'.
func TestAzureNodeDeviceIDWithQuestionMark(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	const id = "sensor?1"
	created := mustOK(t, h.service(t, "create", id), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId="+id+";SharedAccessKey="+key)
	d.await(t, "ready", event("ready"))
	tw := mustOK(t, h.service(t, "get-twin", id), "get twin")["twin"].(map[string]any)
	if tw["properties"].(map[string]any)["reported"].(map[string]any)["firmware"] != "1.2.3" || tw["connectionState"] != "Connected" {
		t.Fatalf("twin after report: %v", tw)
	}
	mustOK(t, h.service(t, "update-desired", id, `{"rate":9}`), "update desired")
	d.await(t, "desired rate 9", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["rate"] == float64(9)
	})
	inv := mustOK(t, h.service(t, "invoke", id, "reboot", `{"n":1}`, "15"), "invoke")
	if result := inv["result"].(map[string]any); result["status"] != float64(200) {
		t.Fatalf("invoke: %v", inv)
	}
}
