package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
)

// mqttCleanConnect connects an MQTT 3.1.1 client with a clean session
// under id, waits for its CONNACK and disconnects.
func mqttCleanConnect(t *testing.T, addr, id string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vh := []byte{0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, byte(len(id))}
	pkt := append([]byte{0x10, byte(len(vh) + len(id))}, vh...)
	pkt = append(pkt, id...)
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		t.Fatalf("CONNACK of %s: % x %v", id, ack, err)
	}
	if _, err := c.Write([]byte{0xe0, 0}); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, c) // until the server closes
}

// TestCmdDiskFullSessionLogsBounded: while the disk is full every MQTT
// clean-session connect fails to record its session's deletion. Clients
// choose their ids, so a client that connects again and again under new
// ids must not write a log line each time: the failure is logged once per
// interval with the count of the lines left out (it used to be one WARN
// line per client id, the id being part of the error text the limiter
// keyed on).
func TestCmdDiskFullSessionLogsBounded(t *testing.T) {
	logs, addrs := diskFullStandalone(t)
	const clients = 30
	for i := range clients {
		mqttCleanConnect(t, addrs["mqtt"], fmt.Sprintf("flood-%c%c", 'a'+i/26, 'a'+i%26))
	}
	n := strings.Count(logs.String(), `msg="mqtt: delete session"`)
	if n == 0 {
		t.Fatalf("no failed session deletion logged; the disk is not full for the broker?\n%s", logs.String())
	}
	if n > 3 {
		t.Fatalf("%d lines for %d clients' failed session deletions, want at most one per interval and site:\n%s", n, clients, logs.String())
	}
}

// diskFullStandalone starts a standalone whose disk is past its full mark
// (the marks set below what the test machine's disk already uses).
func diskFullStandalone(t *testing.T) (logs fmt.Stringer, addrs map[string]string) {
	t.Helper()
	skipUnlessDiskFullAt10(t, os.TempDir())
	return standalone(t, "-set", "store.disk_max_used_ratio=10", "-set", "store.disk_force_clean_ratio=10",
		"-set", "store.disk_full_ratio=10")
}

// TestCmdDiskFullNewTopicSaysDiskFull: a send to a topic the broker would
// create on first use fails, while the disk is full, with the SDK's disk
// full error (it said "no route ... no auto-create template", leaving the
// user looking for a configuration mistake).
func TestCmdDiskFullNewTopicSaysDiskFull(t *testing.T) {
	_, addrs := diskFullStandalone(t)
	p := testProducer(t, []string{addrs["registry"]})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, topic := range []string{"NeverSeenT", "MQTT_INGRESS"} {
		_, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte("x")})
		if !errors.Is(err, client.ErrDiskFull) || !strings.Contains(err.Error(), "disk is full") {
			t.Fatalf("send to %s on a full disk: %v, want client.ErrDiskFull", topic, err)
		}
	}
}
