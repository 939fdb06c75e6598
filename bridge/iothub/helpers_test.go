package iothub

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/client"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

const testHost = "hub.example.test"

// testPolicyKey is the back end's key in the tests.
var testPolicyKey = base64.StdEncoding.EncodeToString([]byte("policy key of the hub tests....."))

// testCluster is an in-process cluster whose brokers host twin shards.
type testCluster struct {
	*cluster.Cluster
}

func startTestCluster(t testing.TB, brokers int) *testCluster {
	t.Helper()
	return startTestClusterWith(t, brokers, nil)
}

// startTestClusterWith is startTestCluster with the cluster's options
// adjusted by tune (nil: none) before it starts.
func startTestClusterWith(t testing.TB, brokers int, tune func(o *cluster.Options)) *testCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	co := cluster.Options{Dir: t.TempDir(), Brokers: brokers}
	if tune != nil {
		tune(&co)
	}
	c, err := cluster.Start(ctx, co)
	if err != nil {
		t.Fatal(err)
	}
	closeTwins, err := c.OpenTwins(ctx, 4)
	if err != nil {
		_ = c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = closeTwins()
		_ = c.Close()
	})
	return &testCluster{c}
}

// node is a bridge node with the hub.
type node struct {
	br   *bridge.Bridge
	hub  *Hub
	addr string // plain MQTT
	logs *testutil.LogBuffer
}

// nodeConfig adjusts a node's options.
type nodeConfig func(*mqtt.Options, *bridge.Options, *Options)

// startNode starts a bridge node with the hub on c; closed at cleanup.
func startNode(t testing.TB, c *testCluster, mods ...nodeConfig) *node {
	t.Helper()
	n := startBridgeOf(t, c, mods...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.hub.Start(ctx, n.br); err != nil {
		t.Fatal(err)
	}
	return n
}

// startBridgeOf starts the bridge node of a hub on c, the hub configured
// but not started; closed at cleanup.
func startBridgeOf(t testing.TB, c *testCluster, mods ...nodeConfig) *node {
	t.Helper()
	logs := &testutil.LogBuffer{}
	lg := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mo := mqtt.DefaultOptions()
	mo.Listen = []string{"127.0.0.1:0"}
	bo := bridge.DefaultOptions(c.RegistryAddrs()...)
	bo.TopicQueues = 4
	bo.Logger = lg
	ho := Options{HostName: testHost, Policies: []Policy{{Name: "owner", Key: testPolicyKey, Permissions: allPerms},
		{Name: "reader", Key: testPolicyKey, Permissions: []string{PermRegistryRead}}},
		Twins: twincli.Options{Registries: c.RegistryAddrs()}, MethodAckTimeout: 2 * time.Second, Logger: lg}
	for _, m := range mods {
		m(&mo, &bo, &ho)
	}
	h, err := New(ho)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Configure(&mo, &bo); err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(mo, bo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n := &node{br: b, hub: h, addr: b.Addrs()[0].String(), logs: logs}
	t.Cleanup(n.close)
	return n
}

func (n *node) close() {
	_ = n.br.Server().Close()
	_ = n.hub.Close()
	_ = n.br.Close()
}

// createDevice registers a SAS device (keys generated) and returns it.
func createDevice(t testing.TB, n *node, id string) *twincli.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := n.hub.Twins().CreateDevice(ctx, &twincli.Device{DeviceID: id})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// deviceToken signs a device token with key valid for d.
func deviceToken(t testing.TB, id Identity, key string, d time.Duration) string {
	t.Helper()
	tok, err := SignToken(testHost+id.Path(), "", key, time.Now().Add(d))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// device is a raw MQTT 3.1.1 device connection, as the SDKs make it.
type device struct {
	*mqtttest.Conn
	t  testing.TB
	id Identity
}

// connectCP is the CONNECT of a device (clean session 0).
func connectCP(id Identity, password string) *packets.Connect {
	return &packets.Connect{ClientID: id.ClientID(), KeepAlive: 60, UsernameFlag: true,
		Username: testHost + "/" + id.ClientID() + "/?api-version=2021-04-12", PasswordFlag: password != "", Password: []byte(password)}
}

// dialDevice connects a device and requires CONNACK 0.
func dialDevice(t testing.TB, addr string, id Identity, password string) *device {
	t.Helper()
	return dialDeviceCP(t, addr, id, connectCP(id, password))
}

// dialDeviceCP connects a device with cp and requires CONNACK 0.
func dialDeviceCP(t testing.TB, addr string, id Identity, cp *packets.Connect) *device {
	t.Helper()
	c := mqtttest.Dial(t, addr, packets.Version311)
	c.RecvTimeout = 10 * time.Second
	if ack := c.Connect(cp); ack.ReasonCode != 0 {
		t.Fatalf("%s: CONNACK %v", id, ack.ReasonCode)
	}
	return &device{Conn: c, t: t, id: id}
}

// mqttPlain connects a client that is not a device (clean start).
func mqttPlain(t testing.TB, addr, clientID string) *device {
	t.Helper()
	c := mqtttest.Dial(t, addr, packets.Version311)
	c.RecvTimeout = 10 * time.Second
	if ack := c.Connect(&packets.Connect{ClientID: clientID, CleanStart: true, KeepAlive: 60}); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	return &device{Conn: c, t: t}
}

// refused connects and returns the CONNACK code.
func refused(t testing.TB, addr string, cp *packets.Connect) packets.ReasonCode {
	t.Helper()
	c := mqtttest.Dial(t, addr, packets.Version311)
	c.RecvTimeout = 10 * time.Second
	return c.Connect(cp).ReasonCode
}

func (d *device) subscribe(filters ...string) []packets.ReasonCode {
	d.t.Helper()
	var subs []packets.Subscription
	for _, f := range filters {
		subs = append(subs, packets.Subscription{Filter: f, QoS: 1})
	}
	d.Send(&packets.Subscribe{PacketID: 1, Subscriptions: subs})
	p := d.Recv()
	sa, ok := p.(*packets.Suback)
	if !ok {
		d.t.Fatalf("want SUBACK, got %T", p)
	}
	return sa.ReasonCodes
}

// publish sends a QoS 0 PUBLISH (the SDKs send twin requests so).
func (d *device) publish(topic string, payload []byte) {
	d.Send(&packets.Publish{Topic: topic, Payload: payload})
}

// publish1 sends a QoS 1 PUBLISH and waits for its PUBACK, returning
// the PUBLISHes that came meanwhile.
func (d *device) publish1(id uint16, topic string, payload []byte) {
	d.t.Helper()
	d.Send(&packets.Publish{Topic: topic, Payload: payload, QoS: 1, PacketID: id})
	for {
		switch p := d.Recv().(type) {
		case *packets.Puback:
			if p.PacketID == id {
				return
			}
		default:
			d.t.Fatalf("want PUBACK, got %T %+v", p, p)
		}
	}
}

// expect returns the next PUBLISH (acknowledging QoS 1).
func (d *device) expect() *packets.Publish {
	d.t.Helper()
	p := d.Recv()
	pub, ok := p.(*packets.Publish)
	if !ok {
		d.t.Fatalf("want PUBLISH, got %T %+v", p, p)
	}
	if pub.QoS == 1 {
		d.Send(&packets.Puback{PacketID: pub.PacketID})
	}
	return pub
}

// nothing asserts no packet comes within dur.
func (d *device) nothing(dur time.Duration) {
	d.t.Helper()
	if p, err := d.Next(dur); err == nil {
		d.t.Fatalf("unexpected %T %+v", p, p)
	}
}

// request sends a twin request and returns the response's status, topic
// and body.
func (d *device) request(topic string, body []byte) (int, string, []byte) {
	d.t.Helper()
	d.publish(topic, body)
	p := d.expect()
	var st int
	if _, err := fmt.Sscanf(strings.TrimPrefix(p.Topic, twinResTopicPrefix), "%d/", &st); err != nil {
		d.t.Fatalf("response topic %q", p.Topic)
	}
	return st, p.Topic, p.Payload
}

// waitFor polls fn until it is true or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// twinDoc reads a twin as a generic JSON document.
func twinDoc(t testing.TB, n *node, id Identity) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tw, err := n.hub.Twins().GetTwin(ctx, id.DeviceID, id.ModuleID)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(tw.JSON, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// pullAll consumes every queue of topic from its start.
func pullAll(t testing.TB, c *testCluster, topic string) *client.PullConsumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}, Group: "HUB_TEST_READER",
		From: client.ConsumeFromFirst, PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	qs, err := pc.Queues(ctx, topic)
	if err == nil {
		err = pc.Assign(qs)
	}
	if err == nil {
		err = pc.Start(ctx)
	}
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// newCert makes a certificate for cn (a server one naming cn and
// 127.0.0.1, else a client one), signed by ca (self-signed when nil).
func newCert(t testing.TB, cn string, server bool, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{cn}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// selfSignedFiles writes a self-signed certificate for cn with its key;
// returns the file names and the certificate.
func selfSignedFiles(t testing.TB, dir, cn string, server bool) (certFile, keyFile string, cert tls.Certificate) {
	t.Helper()
	cert = newCert(t, cn, server, nil, nil)
	kd, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// api is a back-end HTTPS client signing with a policy.
type api struct {
	t      testing.TB
	base   string
	policy string
	key    string
	hc     *http.Client
}

func newAPI(t testing.TB, n *node, policy string) *api {
	t.Helper()
	addrs := n.hub.HTTPSAddrs()
	if len(addrs) == 0 {
		t.Fatal("no HTTPS listener")
	}
	return &api{t: t, base: "https://" + addrs[0].String(), policy: policy, key: testPolicyKey,
		hc: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
}

// do sends a request and returns the status, headers and body.
func (a *api) do(method, path string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	tok, err := SignToken(testHost, a.policy, a.key, time.Now().Add(time.Hour))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", tok)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
