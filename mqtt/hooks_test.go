package mqtt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestMQTTAuthenticateHook: the hook decides before the credentials file,
// its errors pick the CONNACK code (3.1.1 and 5), a refusal counts as an
// auth failure and carries the error text as the reason string.
func TestMQTTAuthenticateHook(t *testing.T) {
	var mu sync.Mutex
	var seen []ConnectRequest
	ts := startServer(t, func(o *Options) {
		o.Authenticate = func(r *ConnectRequest) (bool, error) {
			mu.Lock()
			seen = append(seen, *r)
			mu.Unlock()
			switch r.Username {
			case "good":
				return true, nil
			case "bad":
				return false, fmt.Errorf("%w: signature does not match", ErrBadCredentials)
			case "busy":
				return false, fmt.Errorf("%w: registry down", ErrUnavailable)
			case "nope":
				return false, errors.New("device disabled")
			}
			return false, nil
		}
	})
	for _, tc := range []struct {
		v    packets.Version
		user string
		want packets.ReasonCode
	}{
		{v5, "good", 0},
		{v5, "bad", packets.ReasonBadUserNameOrPassword},
		{v5, "busy", packets.ReasonServerUnavailable},
		{v5, "nope", packets.ReasonNotAuthorized},
		{v5, "other", 0}, // no credentials file: undecided means accepted
		{v311, "good", 0},
		{v311, "bad", packets.ConnectRefusedBadUsernameOrPassword},
		{v311, "busy", packets.ConnectRefusedServerUnavailable},
		{v311, "nope", packets.ConnectRefusedNotAuthorized},
	} {
		r := dialRaw(t, ts.addr, tc.v)
		ack := r.connect(&packets.Connect{ClientID: "c-" + tc.user, CleanStart: true, UsernameFlag: true,
			Username: tc.user, PasswordFlag: true, Password: []byte("pw")})
		if ack.ReasonCode != tc.want {
			t.Errorf("%v %s: got %v want %v", tc.v, tc.user, ack.ReasonCode, tc.want)
		}
		if tc.v == v5 && tc.user == "bad" && ack.Properties.ReasonString != "mqtt: bad credentials: signature does not match" {
			t.Errorf("reason string %q", ack.Properties.ReasonString)
		}
	}
	if n := ts.Stats().AuthFailures.Load(); n != 6 {
		t.Errorf("auth failures %d, want 6", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 9 || seen[0].ClientID != "c-good" || string(seen[0].Password) != "pw" || !seen[0].HasPassword ||
		!seen[0].CleanStart || seen[0].Version != 5 || seen[0].PeerCertificates != nil {
		t.Fatalf("requests %+v", seen)
	}
}

// TestMQTTAuthenticateHookCredentialsFile: an undecided hook leaves the
// decision to the credentials file; an accepting one skips it.
func TestMQTTAuthenticateHookCredentialsFile(t *testing.T) {
	path := mqtttest.CredentialsFile(t, "alice", "s3cret")
	ts := startServer(t, func(o *Options) {
		o.CredentialsFile = path
		o.Authenticate = func(r *ConnectRequest) (bool, error) { return r.Username == "device", nil }
	})
	for user, want := range map[string]packets.ReasonCode{"device": 0, "alice": packets.ReasonBadUserNameOrPassword} {
		r := dialRaw(t, ts.addr, v5)
		ack := r.connect(&packets.Connect{ClientID: user, CleanStart: true, UsernameFlag: true, Username: user,
			PasswordFlag: true, Password: []byte("x")})
		if ack.ReasonCode != want {
			t.Errorf("%s: %v want %v", user, ack.ReasonCode, want)
		}
	}
}

// TestMQTTAuthenticateHookPeerCertificate: on a TLS listener that
// requests client certificates, the hook sees the client's chain.
func TestMQTTAuthenticateHookPeerCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	srvCert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []*x509.Certificate, 2)
	ts := startServer(t, func(o *Options) {
		o.TLSListen = []string{"127.0.0.1:0"}
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientAuth: tls.RequestClientCert,
			MinVersion: tls.VersionTLS12}
		o.Authenticate = func(r *ConnectRequest) (bool, error) {
			got <- r.PeerCertificates
			return true, nil
		}
	})
	clientCert := clientCertificate(t, "device-7")
	for _, certs := range [][]tls.Certificate{{clientCert}, nil} {
		nc, err := tls.Dial("tcp", ts.Addrs()[1].String(), &tls.Config{InsecureSkipVerify: true, Certificates: certs})
		if err != nil {
			t.Fatal(err)
		}
		r := wrapRaw(t, nc, v311)
		if ack := r.connect(&packets.Connect{ClientID: "d", CleanStart: true}); ack.ReasonCode != 0 {
			t.Fatalf("CONNACK %v", ack.ReasonCode)
		}
		chain := <-got
		if certs == nil {
			if chain != nil {
				t.Fatalf("no certificate sent, hook saw %d", len(chain))
			}
			continue
		}
		if len(chain) != 1 || chain[0].Subject.CommonName != "device-7" {
			t.Fatalf("chain %v", chain)
		}
	}
}

// clientCertificate returns a self-signed client certificate.
func clientCertificate(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestMQTTConnectHooks: OnConnect and OnDisconnect come once per accepted
// connection, with distinct connection ids; a takeover ends the old
// connection before the new one is announced, a refused CONNECT is never
// announced.
func TestMQTTConnectHooks(t *testing.T) {
	var mu sync.Mutex
	var events []string
	ids := map[uint64]bool{}
	note := func(kind string) func(ClientInfo) {
		return func(c ClientInfo) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, fmt.Sprintf("%s %s", kind, c.ClientID))
			if kind == "connect" {
				if ids[c.ConnID] {
					t.Errorf("connection id %d reused", c.ConnID)
				}
				ids[c.ConnID] = true
			} else if !ids[c.ConnID] {
				t.Errorf("disconnect of unannounced connection %d", c.ConnID)
			}
		}
	}
	ts := startServer(t, func(o *Options) {
		o.OnConnect, o.OnDisconnect = note("connect"), note("disconnect")
		o.Authenticate = func(r *ConnectRequest) (bool, error) {
			if r.ClientID == "refused" {
				return false, ErrBadCredentials
			}
			return true, nil
		}
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(events) }
	a := dialRaw(t, ts.addr, v311)
	a.connect(&packets.Connect{ClientID: "dev", KeepAlive: 60}) // persistent session
	testutil.WaitFor(t, 5*time.Second, "first connect", func() bool { return count() == 1 })
	b := dialRaw(t, ts.addr, v311)
	b.connect(&packets.Connect{ClientID: "dev", KeepAlive: 60}) // takes over
	a.closed()
	testutil.WaitFor(t, 5*time.Second, "takeover", func() bool { return count() == 3 })
	r := dialRaw(t, ts.addr, v311)
	if ack := r.connect(&packets.Connect{ClientID: "refused", CleanStart: true}); ack.ReasonCode == 0 {
		t.Fatal("refused client accepted")
	}
	b.send(&packets.Disconnect{})
	b.closed()
	testutil.WaitFor(t, 5*time.Second, "disconnect", func() bool { return count() == 4 })
	mu.Lock()
	defer mu.Unlock()
	want := []string{"connect dev", "disconnect dev", "connect dev", "disconnect dev"}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", events, want)
	}
}

// TestMQTTSendToSubscriber: a message on a topic every client subscribes
// to reaches only the named client, through its own subscription (QoS
// capped by it), and only while connected and subscribed.
func TestMQTTSendToSubscriber(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.ReservedFilters = []string{"$hub/#"}
		o.Reserved = func(c ClientInfo, f string, sub bool) bool { return sub }
	})
	a := connected(t, ts.addr, v5, "a")
	b := connected(t, ts.addr, v5, "b")
	a.subscribe(1, sub("$hub/res/#", 0))
	b.subscribe(1, sub("$hub/res/#", 1))
	c := connected(t, ts.addr, v5, "c")
	c.subscribe(1, sub("#", 1)) // never sees the reserved tree

	msg := &Message{Topic: "$hub/res/200/?rid=1", Payload: []byte("for b"), QoS: 1}
	if err := ts.SendToSubscriber("b", msg); err != nil {
		t.Fatal(err)
	}
	p := b.expectPublish()
	if string(p.Payload) != "for b" || p.QoS != 1 {
		t.Fatalf("b got %+v", p)
	}
	b.send(&packets.Puback{PacketID: p.PacketID})
	if err := ts.SendToSubscriber("a", &Message{Topic: "$hub/res/200/?rid=2", Payload: []byte("for a"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	if p := a.expectPublish(); string(p.Payload) != "for a" || p.QoS != 0 {
		t.Fatalf("a got %+v (QoS must be capped at the subscription's 0)", p)
	}
	a.nothing(100 * time.Millisecond)
	c.nothing(100 * time.Millisecond)

	if err := ts.SendToSubscriber("c", &Message{Topic: "$hub/res/x", QoS: 1}); !errors.Is(err, ErrNotSubscribed) {
		t.Fatalf("wildcard subscriber: %v", err)
	}
	if err := ts.SendToSubscriber("a", &Message{Topic: "other", QoS: 1}); !errors.Is(err, ErrNotSubscribed) {
		t.Fatalf("unmatched topic: %v", err)
	}
	if err := ts.SendToSubscriber("zz", msg); !errors.Is(err, ErrNoSession) {
		t.Fatalf("unknown client: %v", err)
	}
	d := dialRaw(t, ts.addr, v311)
	d.connect(&packets.Connect{ClientID: "d", KeepAlive: 60})
	d.subscribe(1, sub("$hub/res/#", 1))
	d.send(&packets.Disconnect{})
	d.closed()
	testutil.WaitFor(t, 5*time.Second, "d offline", func() bool {
		return errors.Is(ts.SendToSubscriber("d", msg), ErrNotConnected)
	})
}

// TestMQTTAuthorizeHook: the hook refuses publishes and subscriptions
// after the reserved and ACL checks; handler topics never reach it.
func TestMQTTAuthorizeHook(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	ts := startServer(t, func(o *Options) {
		o.Authorize = func(c ClientInfo, topic string, subscribe bool) error {
			mu.Lock()
			asked = append(asked, fmt.Sprintf("%s %s %v", c.ClientID, topic, subscribe))
			mu.Unlock()
			if topic == "own/"+c.ClientID || topic == "own/"+c.ClientID+"/sub/#" {
				return nil
			}
			return errors.New("not this client's topic")
		}
	})
	ts.Handle("rpc/#", func(ctx context.Context, from ClientInfo, msg *Message) error { return nil })
	a := connected(t, ts.addr, v5, "a")
	if sa := a.subscribe(1, sub("own/a/sub/#", 1), sub("own/b/#", 1)); sa.ReasonCodes[0] != 1 || sa.ReasonCodes[1] != packets.ReasonNotAuthorized {
		t.Fatalf("SUBACK %v", sa.ReasonCodes)
	}
	if ack := a.publish1(1, "own/b", "x"); ack.ReasonCode != packets.ReasonNotAuthorized ||
		ack.Properties.ReasonString != "not this client's topic" {
		t.Fatalf("PUBACK %v %q", ack.ReasonCode, ack.Properties.ReasonString)
	}
	if ack := a.publish1(2, "own/a", "x"); ack.ReasonCode != 0 {
		t.Fatalf("PUBACK %v", ack.ReasonCode)
	}
	if ack := a.publish1(3, "rpc/x", "x"); ack.ReasonCode != 0 {
		t.Fatalf("handler topic PUBACK %v", ack.ReasonCode)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"a own/a/sub/# true", "a own/b/# true", "a own/b false", "a own/a false"}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("asked %q, want %q", asked, want)
	}
}
