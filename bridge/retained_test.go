package bridge

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeMosquittoCleanRetained: the "clean retained" pattern through
// two bridge nodes, whose retained messages live in the retained system
// topic. mosquitto_pub stores retained messages through node A;
// mosquitto_sub -t '#' lists them on node B, and --remove-retained
// deletes them there; node A then holds none, and a new '#' subscriber on
// it gets only live traffic.
func TestBridgeMosquittoCleanRetained(t *testing.T) {
	subBin, pubBin := mosquittoClients(t)
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	ha, pa := splitAddr(addrOf(a))
	hb, pb := splitAddr(addrOf(b))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(allowFail bool, bin string, args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil && !allowFail {
			t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
		return strings.ReplaceAll(string(out), "Timed out\n", "")
	}
	retained := map[string]string{"home/a": "1", "home/b/c": "2", "devices/d1/telemetry": "3"}
	for topic, v := range retained {
		run(false, pubBin, "-h", ha, "-p", pa, "-V", "5", "-q", "1", "-r", "-t", topic, "-m", v)
	}
	count := func(br *Bridge) int { n, _ := br.Server().RetainedCount(); return n }
	testutil.WaitFor(t, 20*time.Second, "node B's copy of the retained topic", func() bool { return count(b) == 3 })
	want := []string{"devices/d1/telemetry 3", "home/a 1", "home/b/c 2"}
	sorted := func(out string) []string {
		l := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(l)
		return l
	}
	for _, ver := range []string{"mqttv311", "mqttv5"} {
		if got := sorted(run(false, subBin, "-h", hb, "-p", pb, "-V", ver, "-t", "#", "-v", "-C", "3", "-W", "10")); !slices.Equal(got, want) {
			t.Fatalf("%s: mosquitto_sub -t '#' on node B listed %q, want %q", ver, got, want)
		}
	}
	// mosquitto_sub 2.0 waits for -W after --remove-retained (exit 27),
	// as it does with mosquitto's own broker.
	if got := sorted(run(true, subBin, "-h", hb, "-p", pb, "-V", "mqttv5", "-t", "#", "-v", "--remove-retained", "--retained-only", "-W", "3")); !slices.Equal(got, want) {
		t.Fatalf("--remove-retained on node B printed %q, want %q", got, want)
	}
	testutil.WaitFor(t, 20*time.Second, "deletions on both nodes", func() bool { return count(a) == 0 && count(b) == 0 })
	cmd := exec.CommandContext(ctx, subBin, "-h", ha, "-p", pa, "-i", "after-clean", "-t", "#", "-v", "-C", "1")
	var buf strings.Builder
	cmd.Stdout = &buf
	subs := a.Server().Stats().Subscriptions.Load()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "mosquitto_sub subscribed", func() bool { return a.Server().Stats().Subscriptions.Load() > subs })
	run(false, pubBin, "-h", ha, "-p", pa, "-q", "1", "-t", "done", "-m", "live")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(buf.String()); got != "done live" {
		t.Fatalf("after the clean, '#' on node A received %q first, want the live message", got)
	}
}

// TestBridgeReceiveMaximumPipelinedQoS2: through the broker back end,
// whose stores complete asynchronously, receive maximum + 1 QoS 2
// PUBLISHes sent back to back without a PUBREL end with DISCONNECT 0x93
// (after at most receive maximum PUBRECs) and an orderly close.
func TestBridgeReceiveMaximumPipelinedQoS2(t *testing.T) {
	const recvMax = 1024
	c := startCluster(t)
	b := startBridge(t, c, func(mo *mqtt.Options, _ *Options) { mo.ReceiveMaximum = recvMax })
	r := connected(t, addrOf(b), packets.Version5, "pipelined")
	var burst []byte
	for i := 1; i <= recvMax+1; i++ {
		p, err := packets.AppendPacket(nil, &packets.Publish{QoS: 2, PacketID: uint16(i), Topic: "rm/t", Payload: []byte("x")}, packets.Version5)
		if err != nil {
			t.Fatal(err)
		}
		burst = append(burst, p...)
	}
	r.SendBytes(burst)
	pubrecs := 0
	for {
		p, err := r.next(30 * time.Second)
		if err != nil {
			t.Fatalf("after %d PUBRECs: %v, want DISCONNECT 0x93", pubrecs, err)
		}
		if _, ok := p.(*packets.Pubrec); ok {
			pubrecs++
			continue
		}
		d, ok := p.(*packets.Disconnect)
		if !ok || d.ReasonCode != packets.ReasonReceiveMaximumExceeded {
			t.Fatalf("after %d PUBRECs: %T %+v, want DISCONNECT 0x93", pubrecs, p, p)
		}
		break
	}
	if pubrecs > recvMax {
		t.Fatalf("%d PUBRECs for %d unreleased QoS 2 messages, receive maximum %d", pubrecs, recvMax+1, recvMax)
	}
	if _, err := r.next(10 * time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("after the DISCONNECT: %v, want an orderly end of stream", err)
	}
}

func splitAddr(addr string) (host, port string) {
	host, port, _ = net.SplitHostPort(addr)
	return host, port
}
