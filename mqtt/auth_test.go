package mqtt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

func TestMQTTCredentials(t *testing.T) {
	line, err := HashPassword("alice", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte("# users\n"+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) { o.CredentialsFile = path })
	for _, tc := range []struct {
		v        packets.Version
		user     string
		pass     string
		anon     bool
		wantCode packets.ReasonCode
	}{
		{v5, "alice", "s3cret", false, 0},
		{v5, "alice", "wrong", false, packets.ReasonBadUserNameOrPassword},
		{v5, "bob", "s3cret", false, packets.ReasonBadUserNameOrPassword},
		{v5, "", "", true, packets.ReasonNotAuthorized},
		{v311, "alice", "s3cret", false, 0},
		{v311, "alice", "wrong", false, packets.ConnectRefusedBadUsernameOrPassword},
	} {
		r := dialRaw(t, ts.addr, tc.v)
		// Each check derives a PBKDF2 key (100,000 rounds, ~150 ms under
		// -race on an idle core): at load 25 one CONNACK took longer than
		// the default 5 s. The wait is for CPU work, not for an event.
		r.RecvTimeout = time.Minute
		cp := &packets.Connect{ClientID: "u", CleanStart: true}
		if !tc.anon {
			cp.UsernameFlag, cp.Username, cp.PasswordFlag, cp.Password = true, tc.user, true, []byte(tc.pass)
		}
		if ack := r.connect(cp); ack.ReasonCode != tc.wantCode {
			t.Errorf("%v %s/%s: got %v want %v", tc.v, tc.user, tc.pass, ack.ReasonCode, tc.wantCode)
		}
	}
	if _, err := ParseCredentials([]byte("alice:md5:1:xx:yy\n")); !errors.Is(err, ErrCredentials) {
		t.Fatalf("bad scheme accepted: %v", err)
	}
}

func TestMQTTEnhancedAuthRefused(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{ClientID: "x", CleanStart: true}
	cp.Properties.Present.Add(packets.PropAuthMethod)
	cp.Properties.AuthMethod = "SCRAM-SHA-1"
	if ack := r.connect(cp); ack.ReasonCode != packets.ReasonBadAuthenticationMethod {
		t.Fatalf("got %v", ack.ReasonCode)
	}
}

const testACL = `
# per client
client dev1
allow publish devices/%c/#
allow subscribe cmd/%c/#
user admin
allow pubsub #
all
deny subscribe secret/#
allow subscribe public/#
allow publish public/%u/+
`

func TestMQTTACL(t *testing.T) {
	a, err := ParseACL([]byte(testACL))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		client, user, topic string
		sub, want           bool
	}{
		{"dev1", "", "devices/dev1/temp", false, true},
		{"dev1", "", "devices/dev2/temp", false, false},
		{"dev1", "", "cmd/dev1/#", true, true},
		{"dev1", "", "cmd/#", true, false},
		{"x", "admin", "anything/at/all", false, true},
		{"x", "bob", "secret/a", true, false},
		{"x", "bob", "public/+", true, true},
		{"x", "bob", "public/bob/x", false, true},
		{"x", "bob", "public/eve/x", false, false},
		{"x", "bob", "other", false, false},
		{"x+", "", "devices/x+/a", false, false},
	} {
		if got := a.Allowed(c.client, c.user, c.topic, c.sub); got != c.want {
			t.Errorf("%+v: got %v", c, got)
		}
	}
	path := filepath.Join(t.TempDir(), "acl")
	os.WriteFile(path, []byte(testACL), 0o600)
	ts := startServer(t, func(o *Options) { o.ACLFile = path })
	r := connected(t, ts.addr, v5, "dev1")
	sa := r.subscribe(1, sub("cmd/dev1/+", 1), sub("secret/x", 0))
	if sa.ReasonCodes[0] != 1 || sa.ReasonCodes[1] != packets.ReasonNotAuthorized {
		t.Fatalf("suback %v", sa.ReasonCodes)
	}
	if a := r.publish1(2, "devices/dev2/t", "x"); a.ReasonCode != packets.ReasonNotAuthorized {
		t.Fatalf("denied publish acked %v", a.ReasonCode)
	}
	v3 := connected(t, ts.addr, v311, "dev1x")
	sa = v3.subscribe(1, sub("secret/x", 0))
	if sa.ReasonCodes[0] != packets.V3SubackFailure {
		t.Fatalf("v3 suback %v", sa.ReasonCodes)
	}
	if _, err := ParseACL([]byte("allow publish\n")); !errors.Is(err, ErrACL) {
		t.Fatalf("bad ACL accepted: %v", err)
	}
}

func TestMQTTReservedTopicsAndHandlers(t *testing.T) {
	ts := startServer(t, nil)
	r := connected(t, ts.addr, v5, "dev")
	// Naming a reserved filter is refused (0x8F); "#" reaches it only by
	// a wildcard and $SYS is the read-only tree: both granted.
	if sa := r.subscribe(1, sub("statestore/#", 0), sub("#", 0), sub("$SYS/x", 0)); !slices.Equal(sa.ReasonCodes,
		[]packets.ReasonCode{packets.ReasonTopicFilterInvalid, 0, 0}) {
		t.Fatalf("reserved subscribe: %v", sa.ReasonCodes)
	}
	if a := r.publish1(2, "statestore/req", "x"); a.ReasonCode != packets.ReasonNotAuthorized {
		t.Fatalf("reserved publish: %v", a.ReasonCode)
	}
	// A handler claims the request topic and answers into the session.
	var mu sync.Mutex
	var seen []ClientInfo
	unregister := ts.Handle("statestore/req/#", func(ctx context.Context, from ClientInfo, msg *Message) error {
		mu.Lock()
		seen = append(seen, from)
		mu.Unlock()
		return ts.SendTo(from.ClientID, &Message{Topic: msg.ResponseTopic, QoS: 1, Payload: []byte("pong"),
			CorrelationData: msg.CorrelationData})
	})
	req := &packets.Publish{Topic: "statestore/req/get", QoS: 1, PacketID: 3, Payload: []byte("ping")}
	req.Properties.Present = propSet(packets.PropResponseTopic, packets.PropCorrelationData)
	req.Properties.ResponseTopic, req.Properties.CorrelationData = "clients/statestore/dev/resp", []byte("c1")
	r.send(req)
	got := r.expectPublish()
	if got.Topic != "clients/statestore/dev/resp" || string(got.Payload) != "pong" || string(got.Properties.CorrelationData) != "c1" {
		t.Fatalf("response %+v", got)
	}
	if a, ok := r.recv().(*packets.Puback); !ok || a.ReasonCode != 0 {
		t.Fatalf("puback %+v", a)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].ClientID != "dev" || seen[0].Version != 5 {
		t.Fatalf("handler saw %+v", seen)
	}
	mu.Unlock()
	unregister()
	if a := r.publish1(4, "statestore/req/get", "x"); a.ReasonCode != packets.ReasonNotAuthorized {
		t.Fatalf("after unregister: %v", a.ReasonCode)
	}
	if err := ts.SendTo("nobody", &Message{Topic: "x"}); !errors.Is(err, ErrNoSession) {
		t.Fatalf("SendTo unknown: %v", err)
	}
	// Offline sessions get SendTo messages on reconnect.
	off := dialRaw(t, ts.addr, v311)
	off.connect(&packets.Connect{ClientID: "off", KeepAlive: 60})
	off.send(&packets.Disconnect{})
	off.closed()
	if err := ts.SendTo("off", &Message{Topic: "clients/statestore/off/n", QoS: 1, Payload: []byte("n")}); err != nil {
		t.Fatal(err)
	}
	off = dialRaw(t, ts.addr, v311)
	off.connect(&packets.Connect{ClientID: "off", KeepAlive: 60})
	if got := off.expectPublish(); string(got.Payload) != "n" {
		t.Fatalf("%+v", got)
	}
	_ = time.Second
}

// TestServerDisconnectAndSendToConnected: Server.Disconnect sends a v5
// DISCONNECT with the reason (and closes a 3.1.1 connection), logs it and
// keeps a persistent session; SendToConnected never queues for an offline
// session.
func TestServerDisconnectAndSendToConnected(t *testing.T) {
	ts := startServer(t, nil)
	if err := ts.Disconnect("nobody", packets.ReasonNotAuthorized); !errors.Is(err, ErrNoSession) {
		t.Fatalf("Disconnect unknown: %v", err)
	}
	r5 := connected(t, ts.addr, v5, "d5")
	if err := ts.SendToConnected("d5", &Message{Topic: "n/1", QoS: 1, Payload: []byte("on")}); err != nil {
		t.Fatal(err)
	}
	if got := r5.expectPublish(); string(got.Payload) != "on" {
		t.Fatalf("%+v", got)
	}
	if err := ts.Disconnect("d5", packets.ReasonNotAuthorized); err != nil {
		t.Fatal(err)
	}
	if code := r5.closed(); code != int(packets.ReasonNotAuthorized) {
		t.Fatalf("v5 DISCONNECT reason %d, want 0x87", code)
	}
	testutil.WaitFor(t, 5*time.Second, "disconnect log line", func() bool {
		return strings.Contains(ts.logs.String(), "disconnecting client") && strings.Contains(ts.logs.String(), "client=d5")
	})
	r3 := dialRaw(t, ts.addr, v311)
	r3.connect(&packets.Connect{ClientID: "d3", KeepAlive: 60}) // persistent session
	if err := ts.Disconnect("d3", packets.ReasonNotAuthorized); err != nil {
		t.Fatal(err)
	}
	if code := r3.closed(); code != -1 {
		t.Fatalf("3.1.1 got a DISCONNECT %d", code)
	}
	testutil.WaitFor(t, 5*time.Second, "d3 offline", func() bool {
		return errors.Is(ts.Disconnect("d3", 0x87), ErrNotConnected)
	})
	// Offline: SendToConnected refuses and queues nothing; SendTo queues.
	if err := ts.SendToConnected("d3", &Message{Topic: "n/x", QoS: 1, Payload: []byte("lost")}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("SendToConnected offline: %v", err)
	}
	if err := ts.SendTo("d3", &Message{Topic: "n/x", QoS: 1, Payload: []byte("kept")}); err != nil {
		t.Fatal(err)
	}
	r3 = dialRaw(t, ts.addr, v311)
	if ack := r3.connect(&packets.Connect{ClientID: "d3", KeepAlive: 60}); !ack.SessionPresent {
		t.Fatal("session not kept after Disconnect")
	}
	if got := r3.expectPublish(); string(got.Payload) != "kept" {
		t.Fatalf("resumed session got %q, want only the SendTo message", got.Payload)
	}
	r3.nothing(200 * time.Millisecond)
}
