package iothub

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestHubDevelopmentMode: with device auth "none" any device connects
// without credentials, is registered on its first connect, and uses its
// twin; plain clients still follow the server's rules.
func TestHubDevelopmentMode(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.DeviceAuth = AuthNone })
	id := Identity{DeviceID: "proto-7"}
	d := dialDevice(t, n.addr, id, "")
	d.subscribe(twinResFilter)
	waitFor(t, 10*time.Second, "registered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dev, err := n.hub.Twins().GetDevice(ctx, "proto-7")
		return err == nil && dev.Authentication != nil && dev.Authentication.Type == "none" && dev.ConnectionState == "Connected"
	})
	if st, _, body := d.request("$iothub/twin/PATCH/properties/reported/?$rid=1", []byte(`{"hello":"world"}`)); st != 204 {
		t.Fatalf("patch: %d %s", st, body)
	}
	mid := Identity{DeviceID: "proto-7", ModuleID: "cam"}
	m := dialDevice(t, n.addr, mid, "")
	m.subscribe(twinResFilter)
	waitFor(t, 10*time.Second, "module registered", func() bool {
		st, _, _ := m.request("$iothub/twin/GET/?$rid=m", nil)
		return st == 200
	})
	// The client id must still match the user name.
	cp := connectCP(id, "")
	cp.ClientID = "someone-else"
	if got := refused(t, n.addr, cp); got != packets.ConnectRefusedNotAuthorized {
		t.Fatalf("mismatched client id: %v", got)
	}
}

// tlsDevice connects a device over TLS with a client certificate.
func tlsDevice(t testing.TB, addr string, id Identity, cert *tls.Certificate) packets.ReasonCode {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := mqtttest.New(t, nc, packets.Version311)
	c.RecvTimeout = 10 * time.Second
	return c.Connect(connectCP(id, "")).ReasonCode
}

// TestHubX509Devices: a device whose certificate thumbprint is registered
// (selfSigned) and one whose certificate chains to the trusted CA with its
// id as common name (certificateAuthority) connect over TLS without a
// password; other certificates are refused.
func TestHubX509Devices(t *testing.T) {
	dir := t.TempDir()
	srvCert, srvKey, _ := selfSignedFiles(t, dir, testHost, true)
	_, _, devCert := selfSignedFiles(t, dir, "cam-1", false)
	_, _, strangerCert := selfSignedFiles(t, dir, "cam-1x", false)
	caFile, caCert, caKey := makeCA(t, dir)
	signed := issue(t, caCert, caKey, "gate-1")
	wrongCN := issue(t, caCert, caKey, "gate-2")
	c := startTestCluster(t, 1)
	n := startNode(t, c, func(mo *mqtt.Options, _ *bridge.Options, o *Options) {
		mo.TLSListen = []string{"127.0.0.1:0"}
		mo.TLSCertFile, mo.TLSKeyFile = srvCert, srvKey
		o.X509CAFile = caFile
	})
	tlsAddr := n.br.Addrs()[1].String()
	sum := sha1.Sum(devCert.Certificate[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.hub.Twins().CreateDevice(ctx, &twincli.Device{DeviceID: "cam-1", Authentication: &twincli.Authentication{Type: "selfSigned",
		X509Thumbprint: &twincli.X509Thumbprint{PrimaryThumbprint: strings.ToUpper(hex.EncodeToString(sum[:]))}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.hub.Twins().CreateDevice(ctx, &twincli.Device{DeviceID: "gate-1",
		Authentication: &twincli.Authentication{Type: "certificateAuthority"}}); err != nil {
		t.Fatal(err)
	}
	cam, gate := Identity{DeviceID: "cam-1"}, Identity{DeviceID: "gate-1"}
	for _, tc := range []struct {
		name string
		id   Identity
		cert *tls.Certificate
		want packets.ReasonCode
	}{
		{"registered thumbprint", cam, &devCert, 0},
		{"another certificate", cam, &strangerCert, packets.ConnectRefusedBadUsernameOrPassword},
		{"no certificate", cam, nil, packets.ConnectRefusedBadUsernameOrPassword},
		{"CA-signed", gate, &signed, 0},
		{"CA-signed for another id", gate, &wrongCN, packets.ConnectRefusedNotAuthorized},
		{"self-signed for a CA device", gate, &devCert, packets.ConnectRefusedBadUsernameOrPassword},
	} {
		if got := tlsDevice(t, tlsAddr, tc.id, tc.cert); got != tc.want {
			t.Errorf("%s: CONNACK %v, want %v", tc.name, got, tc.want)
		}
	}
}

// makeCA writes a CA certificate file and returns it with its key.
func makeCA(t testing.TB, dir string) (string, *x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, cert, key
}

// issue makes a client certificate for cn signed by the CA.
func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) tls.Certificate {
	t.Helper()
	return newCert(t, cn, false, ca, caKey)
}

// TestHubTokenExpiryDisconnects: a device's connection ends when its SAS
// token expires.
func TestHubTokenExpiryDisconnects(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	dev := createDevice(t, n, "short")
	id := Identity{DeviceID: "short"}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, 2*time.Second))
	start := time.Now()
	d.Closed() // fails the test when the connection stays open
	// Well past the token's 2 s, well before keep-alive (60 s) would.
	if time.Since(start) > 12*time.Second {
		t.Fatalf("closed %v after connect, the token lived 2 s", time.Since(start))
	}
	waitFor(t, 10*time.Second, "Disconnected", func() bool { return twinDoc(t, n, id)["connectionState"] == "Disconnected" })
}
