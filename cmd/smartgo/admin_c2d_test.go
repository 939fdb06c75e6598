package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/client"
	twc "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

// twinAdmin starts an in-process cluster whose broker hosts twins and
// returns it with a runner of admin commands against it, which fails the
// test unless the command exits with want.
func twinAdmin(t *testing.T) (*cluster.Cluster, func(want int, args ...string) (string, string)) {
	t.Helper()
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closeTwins, err := c.OpenTwins(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeTwins() })
	reg := strings.Join(c.RegistryAddrs(), ",")
	return c, func(want int, args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
		if code != want {
			t.Fatalf("admin %v: exit %d, want %d: %s%s", args, code, want, stdout, stderr)
		}
		return stdout, stderr
	}
}

// `admin device send` stores a cloud-to-device message in the egress
// topic in the bridge's format (MQTT topic with the property bag, QoS 1,
// expiry), keyed by the device; refuses unknown devices and bad flags.
func TestCmdAdminDeviceSend(t *testing.T) {
	c, run := twinAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run(exitOK, "device", "create", "-d", "valve-9")
	out, _ := run(exitOK, "-o", "json", "device", "send", "-d", "valve-9", "-body", `{"open":true}`, "-id", "cmd-1",
		"-ttl", "10m", "-p", "priority=high", "-p", "by=ops")
	var res struct{ DeviceID, MessageID, Expiry string }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.DeviceID != "valve-9" || res.MessageID != "cmd-1" {
		t.Fatalf("send: %q %v", out, err)
	}
	if _, errOut := run(exitFailure, "device", "send", "-d", "ghost", "-body", "x"); !strings.Contains(errOut, "not found") {
		t.Fatalf("unknown device: %q", errOut)
	}
	run(exitUsage, "device", "send", "-body", "x")
	run(exitUsage, "device", "send", "-d", "valve-9", "-body", "x", "-ttl", "0s")
	run(exitUsage, "device", "send", "-d", "valve-9", "-body", "x", "-max-queue-depth", "0")
	// The message counts in the identity's cloudToDeviceMessageCount; a
	// device holding -max-queue-depth refuses one more, and nothing of it
	// is stored.
	if _, errOut := run(exitFailure, "device", "send", "-d", "valve-9", "-body", "x", "-max-queue-depth", "1"); !strings.Contains(errOut, "DeviceMaximumQueueDepthExceeded") {
		t.Fatalf("over the queue depth: %q", errOut)
	}
	if out, _ := run(exitOK, "-o", "json", "device", "get", "-d", "valve-9"); !strings.Contains(out, `"cloudToDeviceMessageCount": 1`) {
		t.Fatalf("device get: %s", out)
	}
	if _, errOut := run(exitFailure, "device", "send", "-d", "valve-9", "-body", "x", "-p", "$bad=1"); !strings.Contains(errOut, "$bad") {
		t.Fatalf("bad property: %q", errOut)
	}

	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}, Group: "C2D_READER", From: client.ConsumeFromFirst,
		PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	qs, err := pc.Queues(ctx, bridge.DefaultEgressTopic)
	if err == nil {
		err = pc.Assign(qs)
	}
	if err == nil {
		err = pc.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := pc.Poll(ctx)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("egress topic: %d messages, %v", len(msgs), err)
	}
	m := msgs[0]
	want := "devices/valve-9/messages/devicebound/%24.mid=cmd-1&%24.to=%2Fdevices%2Fvalve-9%2Fmessages%2FdeviceBound&%24.exp="
	topic := m.Properties[bridge.PropTopic]
	if string(m.Body) != `{"open":true}` || m.Properties[bridge.PropQoS] != "1" || !strings.HasPrefix(topic, want) ||
		!strings.HasSuffix(topic, "&priority=high&by=ops") {
		t.Fatalf("stored message: %s %v", m.Body, m.Properties)
	}
}

// TestCmdAdminDeviceSendBeforeFirstConnect: on an IoT hub node (standalone,
// development mode), `admin device create` then `admin device send` for a
// device that has never connected, then the device's first connect (MQTT
// 3.1.1, clean session 0, as the device SDKs do): it gets the message, as
// when the HTTPS API sends it. The CLI used to store it with no session to
// hold it, and the device never got it.
func TestCmdAdminDeviceSendBeforeFirstConnect(t *testing.T) {
	_, addrs := standalone(t, "-set", "iothub.enabled=true", "-set", "iothub.device_auth=none")
	reg := addrs["registry"]
	admin := func(args ...string) {
		t.Helper()
		if code, out, errOut := runCmd(t, append([]string{"admin", "-registry", reg}, args...)...); code != exitOK {
			t.Fatalf("admin %v: exit %d: %s%s", args, code, out, errOut)
		}
	}
	admin("device", "create", "-d", "fresh-1", "-auth", "none")
	admin("device", "send", "-d", "fresh-1", "-body", "before-first-connect", "-ttl", "10m")
	// A back end that produces to the egress topic itself (docs/iothub.md):
	// the session `admin device create` prepared holds its message too.
	admin("device", "create", "-d", "fresh-2", "-auth", "none")
	p := testProducer(t, []string{reg})
	if _, err := p.Send(context.Background(), &client.Message{Topic: bridge.DefaultEgressTopic, Body: []byte("from-a-back-end"),
		Properties: map[string]string{bridge.PropTopic: "devices/fresh-2/messages/devicebound/", bridge.PropQoS: "1"}}); err != nil {
		t.Fatal(err)
	}

	// Devices a back end creates with the Go API (client/twin), by create
	// or by upsert: the client asks a hub node for their sessions through
	// the registries, as the CLI does. They used to get none.
	tc, err := twc.New(twc.Options{Registries: []string{reg}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tc.CreateDevice(ctx, &twc.Device{DeviceID: "fresh-3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.PutDevice(ctx, &twc.Device{DeviceID: "fresh-4"}, twc.PutUpsert, ""); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"fresh-3", "fresh-4"} {
		if _, err := p.Send(ctx, &client.Message{Topic: bridge.DefaultEgressTopic, Body: []byte("api-" + dev),
			Properties: map[string]string{bridge.PropTopic: "devices/" + dev + "/messages/devicebound/", bridge.PropQoS: "1"}}); err != nil {
			t.Fatal(err)
		}
	}

	for dev, want := range map[string]string{"fresh-1": "before-first-connect", "fresh-2": "from-a-back-end",
		"fresh-3": "api-fresh-3", "fresh-4": "api-fresh-4"} {
		firstConnectGets(t, addrs["mqtt"], dev, want)
	}
}

// firstConnectGets connects a paho device (clean session 0) and expects
// its session to be there, holding a cloud-to-device message want.
func firstConnectGets(t *testing.T, addr, dev, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *paho.Publish, 4)
	pc := paho.NewClient(paho.ClientConfig{Conn: nc, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) { got <- pr.Packet; return true, nil }}})
	ack, err := pc.Connect(ctx, &paho.Connect{ClientID: dev, KeepAlive: 30, UsernameFlag: true,
		Username: "hub/" + dev + "/?api-version=2021-04-12"})
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect %s: %v %+v", dev, err, ack)
	}
	defer pc.Disconnect(&paho.Disconnect{})
	if !ack.SessionPresent {
		t.Errorf("%s's first connect found no session", dev)
	}
	select {
	case p := <-got:
		if string(p.Payload) != want || !strings.HasPrefix(p.Topic, "devices/"+dev+"/messages/devicebound/") {
			t.Fatalf("%s got %q on %s", dev, p.Payload, p.Topic)
		}
	case <-ctx.Done():
		t.Fatalf("%s never got the message stored before its first connect", dev)
	}
}

// TestCmdAdminDeviceSendWithoutHubWarns: with no IoT hub node (a plain
// bridge), `admin device send` to a device that has no persistent session
// stored the message and said only "stored", yet a device connecting
// later never gets it (no session held its subscription). It warns now;
// to a device with a persistent session, which does get it, it does not.
func TestCmdAdminDeviceSendWithoutHubWarns(t *testing.T) {
	_, addrs := standalone(t)
	reg := addrs["registry"]
	send := func(dev string) string {
		t.Helper()
		for _, args := range [][]string{{"device", "create", "-d", dev, "-auth", "none"}, {"device", "send", "-d", dev, "-body", "to-" + dev}} {
			code, out, errOut := runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
			if code != exitOK {
				t.Fatalf("admin %v: exit %d: %s%s", args, code, out, errOut)
			}
			if args[1] == "send" {
				return errOut
			}
		}
		return ""
	}
	if errOut := send("nohub-1"); !strings.Contains(errOut, "warning: nohub-1 has no persistent MQTT session") {
		t.Fatalf("send to a device without a session, no hub: stderr %q, want the warning", errOut)
	}

	// nohub-2 subscribed with a persistent session and left.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := net.Dial("tcp", addrs["mqtt"])
	if err != nil {
		t.Fatal(err)
	}
	pc := paho.NewClient(paho.ClientConfig{ClientID: "nohub-2", Conn: nc})
	expiry := uint32(600)
	if _, err := pc.Connect(ctx, &paho.Connect{ClientID: "nohub-2", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "devices/nohub-2/messages/devicebound/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	_ = pc.Disconnect(&paho.Disconnect{})
	testutil.WaitFor(t, 15*time.Second, "nohub-2's session offline", func() bool {
		code, out, _ := runCmd(t, "admin", "-registry", reg, "-o", "json", "mqtt", "sessions", "-prefix", "nohub-2")
		return code == exitOK && strings.Contains(out, `"online": false`)
	})
	if errOut := send("nohub-2"); strings.Contains(errOut, "warning") {
		t.Fatalf("send to a device with a persistent session: stderr %q", errOut)
	}
	firstConnectGets(t, addrs["mqtt"], "nohub-2", "to-nohub-2")
}
