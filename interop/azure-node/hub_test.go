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
amqps_listen = %q

[[iothub.policy]]
name = "iothubowner"
key = %q
permissions = ["registryRead", "registryWrite", "serviceConnect"]
`, net.JoinHostPort(ip, "8883"), certFile, keyFile, hubHost, net.JoinHostPort(ip, "443"), net.JoinHostPort(ip, "5671"), h.policyKey)
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
	cmd := exec.Command(h.bin, withoutAMQP(h.args)...)
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
	return h.serviceWith(t, nil, args...)
}

// serviceWith is service with more environment (a later value of a
// variable replaces an earlier one).
func (h *hub) serviceWith(t *testing.T, env []string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"service.js"}, args...)...)
	cmd.Env = h.nodeEnv(env...)
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

// withoutAMQP turns AMQP off in a bridge or standalone command line (right
// after the command word, so a test's own amqp.listen comes later and
// wins): the processes of the tests must not all take port 5672.
func withoutAMQP(args []string) []string {
	if len(args) > 0 && (args[0] == "bridge" || args[0] == "standalone") {
		return append([]string{args[0], "-set", "amqp.listen="}, args[1:]...)
	}
	return args
}
