package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
)

// topic update with fewer read queues than queues that hold messages
// warns (on stderr, exit 0) how many messages no consumer reads now; a
// shrink over empty queues and a growth say nothing.
func TestCmdAdminTopicShrinkWarns(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	admin := func(args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
		if code != exitOK {
			t.Fatalf("admin %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout, stderr)
		}
		return stdout, stderr
	}
	admin("topic", "create", "-t", "ShrinkT", "-r", "4", "-w", "4")
	admin("topic", "create", "-t", "EmptyT", "-r", "4", "-w", "4")
	p := testProducer(t, c.RegistryAddrs())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// One message per queue: queues 2 and 3 hold two.
	byID := func(qs []client.MessageQueue, key string) client.MessageQueue {
		for _, q := range qs {
			if strconv.Itoa(int(q.QueueID)) == key {
				return q
			}
		}
		return qs[0]
	}
	var broker string
	for q := range 4 {
		res, err := p.SendOrderly(ctx, &client.Message{Topic: "ShrinkT", Body: []byte("m")}, strconv.Itoa(q), byID)
		if err != nil || res.Queue.QueueID != int32(q) {
			t.Fatalf("send to queue %d: %v %+v", q, err, res)
		}
		broker = res.Queue.BrokerName
	}
	if _, stderr := admin("topic", "update", "-t", "ShrinkT", "-r", "2", "-w", "2"); !strings.Contains(stderr,
		"warning: "+broker+"'s queues 2 and above of ShrinkT hold 2 messages that no consumer reads with 2 read queues") {
		t.Fatalf("shrink over messages: stderr %q", stderr)
	}
	if _, stderr := admin("topic", "update", "-t", "ShrinkT", "-r", "4", "-w", "4"); stderr != "" {
		t.Fatalf("growth: stderr %q", stderr)
	}
	if _, stderr := admin("topic", "update", "-t", "EmptyT", "-r", "1", "-w", "1"); stderr != "" {
		t.Fatalf("shrink over empty queues: stderr %q", stderr)
	}
}
