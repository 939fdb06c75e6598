package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
)

// Every admin command once, against a live in-process cluster.
func TestCmdAdminCommands(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	admin := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
		if code != exitOK {
			t.Fatalf("admin %v: exit %d: %s", args, code, stderr)
		}
		return stdout
	}
	if out := admin("topic", "create", "-t", "AdminT", "-r", "2", "-w", "2"); !strings.Contains(out, "AdminT: ok") {
		t.Fatalf("create: %q", out)
	}
	admin("topic", "update", "-t", "AdminT", "-r", "2", "-w", "2", "-perm", "6")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(admin("topic", "list"), "AdminT") {
		if time.Now().After(deadline) {
			t.Fatal("topic never listed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := admin("topic", "route", "-t", "AdminT"); !strings.Contains(out, "broker-a") {
		t.Fatalf("route: %q", out)
	}

	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Send(ctx, &client.Message{Topic: "AdminT", Body: []byte("hello admin"), Keys: []string{"order-42"}})
	if err != nil {
		t.Fatal(err)
	}
	if out := admin("topic", "stats", "-t", "AdminT"); !strings.Contains(out, "MAX") {
		t.Fatalf("stats: %q", out)
	}
	if out := admin("cluster"); !strings.Contains(out, "TestCluster") || !strings.Contains(out, c.BrokerAddr(0)) {
		t.Fatalf("cluster: %q", out)
	}
	if out := admin("broker", "stats"); !strings.Contains(out, "brokerVersion") {
		t.Fatalf("broker stats: %q", out)
	}
	if out := admin("msg", "by-id", "-id", res.OffsetMsgID); !strings.Contains(out, "hello admin") {
		t.Fatalf("by-id: %q", out)
	}
	var msgs []map[string]any
	if err := json.Unmarshal([]byte(admin("-o", "json", "msg", "by-key", "-t", "AdminT", "-k", "order-42")), &msgs); err != nil || len(msgs) != 1 || msgs[0]["body"] != "hello admin" {
		t.Fatalf("by-key: %v %v", msgs, err)
	}
	if out := admin("offset", "reset", "-g", "ag", "-t", "AdminT", "-ts", "1h"); !strings.Contains(out, "NEW") {
		t.Fatalf("reset: %q", out)
	}
	var prog struct {
		TotalLag int64 `json:"totalLag"`
	}
	if err := json.Unmarshal([]byte(admin("group", "progress", "-g", "ag", "-t", "AdminT", "-o", "json")), &prog); err != nil || prog.TotalLag != 1 {
		t.Fatalf("progress: %+v %v", prog, err)
	}
	if out := admin("topic", "delete", "-t", "AdminT"); !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %q", out)
	}
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "topic", "route", "-t", "AdminT"); code != exitFailure || !strings.Contains(stderr, "does not exist") {
		t.Fatalf("route after delete: %d %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "admin", "-registry", reg, "frob"); code != exitUsage {
		t.Fatalf("unknown command: exit %d", code)
	}
}
