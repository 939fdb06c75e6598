package main

import (
	"context"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// waitLog waits until the log holds want.
func waitLog(t *testing.T, errb *testutil.LogBuffer, want string, done chan int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errb.String(), want) {
		exited := false
		select {
		case code := <-done:
			done <- code
			exited = true
		default:
		}
		if exited || time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", want, errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mqttPing connects a v3.1.1 client to addr and expects a CONNACK.
func mqttPing(t *testing.T, addr string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := packets.AppendPacket(nil, &packets.Connect{ClientID: "cmd-test", CleanStart: true, KeepAlive: 10}, packets.Version311)
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	if _, err := nc.Read(buf); err != nil || buf[0] != 0x20 || buf[3] != 0 {
		t.Fatalf("CONNACK: % x %v", buf, err)
	}
}

var listenRE = regexp.MustCompile(`listen="?\[([0-9.:]+)`)

// stopRun cancels a running subcommand and expects a clean exit.
func stopRun(t *testing.T, cancel context.CancelFunc, done chan int, errb *testutil.LogBuffer) {
	t.Helper()
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop")
	}
}

// The bridge runs against a cluster, accepts MQTT clients, and stops on
// its context (the signal) with exit 0.
func TestCmdBridgeRunsAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rctx, stop := context.WithCancel(context.Background())
	var out, errb testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(rctx, []string{"bridge", "-set", "amqp.listen=", "-listen", "127.0.0.1:0", "-registries", strings.Join(c.RegistryAddrs(), ","),
			"-set", "bridge.default_topic=CMD_TEST"}, &out, &errb)
	}()
	waitLog(t, &errb, "bridge started", done)
	m := listenRE.FindStringSubmatch(errb.String())
	if m == nil {
		stop()
		t.Fatalf("no listen address in %s", errb.String())
	}
	mqttPing(t, m[1])
	stopRun(t, stop, done, &errb)
}

// Standalone runs registry, broker and bridge in one process.
func TestCmdStandaloneRunsBridge(t *testing.T) {
	dir := t.TempDir()
	rctx, stop := context.WithCancel(context.Background())
	var out, errb testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(rctx, []string{"standalone", "-set", "amqp.listen=", "-data", dir, "-set", "registry.listen=127.0.0.1:0",
			"-set", "broker.listen=127.0.0.1:0", "-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=127.0.0.1:0",
			"-set", "store.segment_size=1MiB", "-set", "store.max_message_size=64KiB"}, &out, &errb)
	}()
	waitLog(t, &errb, "standalone running", done)
	m := regexp.MustCompile(`bridge=([0-9.:]+)`).FindStringSubmatch(errb.String())
	if m == nil {
		stop()
		t.Fatalf("no bridge address in %s", errb.String())
	}
	mqttPing(t, m[1])
	stopRun(t, stop, done, &errb)
}

// [bridge] maps onto the MQTT server and bridge options field by field.
func TestCmdBridgeOptionsMapping(t *testing.T) {
	f := conf.Default()
	f.Bridge.TLSListen, f.Bridge.TLSCert, f.Bridge.TLSKey = "127.0.0.1:8883", "c.pem", "k.pem"
	f.Bridge.ACLFile, f.Bridge.CredentialsFile = "acl", "creds"
	f.Bridge.Routes = []conf.Route{{Filter: "a/#", Topic: "A"}}
	mo, bo := bridgeOptions(f.Bridge, slog.New(slog.DiscardHandler))
	if len(mo.Listen) != 1 || mo.Listen[0] != "0.0.0.0:1883" || mo.TLSListen[0] != "127.0.0.1:8883" || mo.TLSCertFile != "c.pem" ||
		mo.TLSKeyFile != "k.pem" || mo.MaxPacketSize != 4<<20 || mo.ReceiveMaximum != 1024 || mo.KeepAliveMax != 20*time.Minute ||
		mo.SessionExpiryMax != 24*time.Hour || mo.ACLFile != "acl" || mo.CredentialsFile != "creds" ||
		mo.SysInterval != mqtt.DefaultSysInterval {
		t.Fatalf("mqtt options %+v", mo)
	}
	f.Bridge.SysInterval = conf.Duration{}
	if mo, _ := bridgeOptions(f.Bridge, slog.New(slog.DiscardHandler)); mo.SysInterval >= 0 {
		t.Fatalf(`sys_interval = "0s" maps to SysInterval %v, want the tree disabled`, mo.SysInterval)
	}
	if bo.DefaultTopic != "MQTT_INGRESS" || bo.EgressTopic != "MQTT_EGRESS" || len(bo.Routes) != 1 ||
		bo.Routes[0].Filter != "a/#" || bo.Routes[0].Topic != "A" || bo.Registries[0] != "127.0.0.1:9876" {
		t.Fatalf("bridge options %+v", bo)
	}
	if err := mo.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := bo.Validate(); err != nil {
		t.Fatal(err)
	}
}
