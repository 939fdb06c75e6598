package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
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
	if out := admin("topic", "create", "-t", "AdminT", "-r", "2", "-w", "2"); !strings.Contains(out, "AdminT: ok (created)") {
		t.Fatalf("create: %q", out)
	}
	if out := admin("topic", "update", "-t", "AdminT", "-r", "2", "-w", "2", "-perm", "6"); !strings.Contains(out, "AdminT: ok (updated)") {
		t.Fatalf("update: %q", out)
	}
	// An update of a topic nobody knows creates it, and says so.
	if out := admin("topic", "update", "-t", "AdminNew", "-r", "2", "-w", "2"); !strings.Contains(out, "AdminNew: ok (created: it did not exist)") {
		t.Fatalf("update of a missing topic: %q", out)
	}
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

	p := testProducer(t, c.RegistryAddrs())
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
	consumeOnce(ctx, t, c, "ag", "AdminT")
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

// Mistakes are refused with a message saying what is wrong and a non-zero
// exit, through the binary: a missing topic or group (exit 1, the brokers
// and registries were asked) and out-of-range flags (exit 2, nothing sent).
func TestCmdBinaryAdminRefusesMistakes(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	if code, _, stderr := runBin(t, 60*time.Second, "admin", "-registry", reg, "topic", "create", "-t", "RealT", "-r", "2", "-w", "2"); code != exitOK {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"topic", "delete", "-t", "NoSuchTopic"}, exitFailure, "topic does not exist: NoSuchTopic"},
		{[]string{"topic", "create", "-t", "PermT", "-perm", "9"}, exitUsage, "-perm must be 6 (read and write), 4 (read only) or 2 (write only), not 9"},
		{[]string{"topic", "update", "-t", "RealT", "-perm", "1"}, exitUsage, "-perm must be"},
		{[]string{"topic", "create", "-t", "QueueT", "-r", "0"}, exitUsage, "-r and -w must be between 1 and 1024"},
		{[]string{"topic", "create", "-t", "QueueT", "-w", "5000"}, exitUsage, "-r and -w must be between 1 and 1024"},
		{[]string{"topic", "create"}, exitUsage, "-t is required"},
		{[]string{"offset", "reset", "-g", "no_such_group", "-t", "RealT", "-ts", "1h"}, exitFailure, "consumer group does not exist: no_such_group"},
		{[]string{"offset", "reset", "-g", "g", "-t", "RealT", "-ts", "yesterday"}, exitUsage, "-ts: want RFC 3339"},
		// mqadmin's flag and time format (resetOffsetByTime -s), and -i (queryMsgById).
		{[]string{"offset", "reset", "-g", "no_such_group", "-t", "RealT", "-s", "2026-01-02#15:04:05:000"}, exitFailure, "consumer group does not exist: no_such_group"},
		{[]string{"msg", "by-id", "-i", "zz"}, exitFailure, `offset id "zz" has 2 characters`},
		// A client message id (the MSG_ID column) given for an offset id.
		{[]string{"msg", "by-id", "-id", "C00002024DA3C20048A88A6EDF4B0002"}, exitFailure,
			"a client message id (MSG_ID, UNIQ_KEY), not an offset id (OFFSET_MSG_ID): record: bad message id: offset id \"C00002024DA3C20048A88A6EDF4B0002\" has port"},
		{[]string{"msg", "by-id", "-id", "C00002024DA3C20048A88A6EDF4B0002"}, exitFailure,
			"\nlook it up by key: smartgo admin msg by-key -uniq -t TOPIC -k C00002024DA3C20048A88A6EDF4B0002\n"},
		{[]string{"group", "progress", "-g", "no_such_group"}, exitFailure, "consumer group does not exist: no_such_group"},
		{[]string{"group", "progress", "-g", "no_such_group", "-t", "RealT"}, exitFailure, "consumer group does not exist"},
		{[]string{"msg", "by-key", "-t", "RealT", "-k", "x", "-max", "0"}, exitUsage, "-max must be at least 1"},
		{[]string{"topic", "list", "-o", "yaml"}, exitUsage, "-o must be table or json"},
		{[]string{"topic", "list", "-timeout", "0"}, exitUsage, "-timeout must be positive, not 0s"},
		{[]string{"cluster", "-timeout", "-1s"}, exitUsage, "-timeout must be positive, not -1s"},
		{[]string{"device", "create", "-d", "d1", "-auth", "foo"}, exitUsage, `-auth must be sas, selfSigned, certificateAuthority, none, not "foo"`},
		{[]string{"device", "create", "-d", "d1", "-status", "maybe"}, exitUsage, `-status must be enabled, disabled, not "maybe"`},
		{[]string{"device", "update", "-d", "d1"}, exitUsage, "nothing to change"},
		{[]string{"device", "update", "-d", "d1", "-status", "off"}, exitUsage, `-status must be enabled, disabled, not "off"`},
	} {
		code, stdout, stderr := runBin(t, 60*time.Second, append([]string{"admin", "-registry", reg}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("admin %s: exit %d (want %d), stdout %q, stderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
		}
	}
	_, out, _ := runBin(t, 60*time.Second, "admin", "-registry", reg, "topic", "list")
	if strings.Contains(out, "PermT") || strings.Contains(out, "QueueT") {
		t.Fatalf("a refused create created a topic:\n%s", out)
	}
}

// TestCmdAdminOffsetResetOnlineConsumer: `admin offset reset` while a
// SmartGo SDK push consumer of the group runs: the broker's notice makes
// it drop its positions and consume again what was stored after the reset
// time, and what it commits afterwards keeps the reset (it used to keep
// its positions and commit them over the reset).
func TestCmdAdminOffsetResetOnlineConsumer(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "topic", "create", "-t", "ResetT", "-r", "2", "-w", "2"); code != exitOK {
		t.Fatalf("create: %s", stderr)
	}
	p := testProducer(t, c.RegistryAddrs())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := func(body string) {
		if _, err := p.Send(ctx, &client.Message{Topic: "ResetT", Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	send("before")
	cut := time.Now().UnixMilli() + 1
	for time.Now().UnixMilli() <= cut {
		time.Sleep(time.Millisecond)
	}
	for i := range 4 {
		send(fmt.Sprint("after-", i))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	count := func(prefix string, n int) int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for body, c := range seen {
			if strings.HasPrefix(body, prefix) && c >= n {
				k++
			}
		}
		return k
	}
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()},
		Group: "rg", From: client.ConsumeFromFirst, PersistInterval: 100 * time.Millisecond},
		func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				seen[string(m.Body)]++
			}
			return client.ConsumeSuccess
		})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe("ResetT", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lag := func() int64 {
		_, out, _ := runCmd(t, "admin", "-registry", reg, "group", "progress", "-g", "rg", "-t", "ResetT", "-o", "json")
		var prog struct {
			TotalLag int64 `json:"totalLag"`
		}
		if json.Unmarshal([]byte(out), &prog) != nil {
			return -1
		}
		return prog.TotalLag
	}
	testutil.WaitFor(t, 30*time.Second, "all five consumed and committed", func() bool {
		return count("after-", 1) == 4 && count("before", 1) == 1 && lag() == 0
	})
	if code, out, stderr := runCmd(t, "admin", "-registry", reg, "offset", "reset", "-g", "rg", "-t", "ResetT", "-ts", fmt.Sprint(cut)); code != exitOK {
		t.Fatalf("reset: %s %s", out, stderr)
	}
	testutil.WaitFor(t, 30*time.Second, "the four after the reset time consumed again", func() bool { return count("after-", 2) == 4 })
	if count("before", 2) != 0 {
		t.Errorf("the message before the reset time came again: %v", seen)
	}
	testutil.WaitFor(t, 30*time.Second, "the lag back to 0 after the reset", func() bool { return lag() == 0 })
}

// TestCmdAdminDeleteSystemTopic: `admin topic delete` of a topic the
// broker keeps its own data or features in (the state store's, the twins',
// the auto-create template, the MQTT bridge's sessions and retained
// messages) is refused, and the topic keeps its route (a
// delete used to remove it, and the state store answered 503 from then on).
// So is the bridge's ingress topic, which it delivers from: deleted under
// a running bridge, it was made again at offset 0 by the next publish,
// below the bridge's positions, and what was published then was
// acknowledged and never delivered live until the bridge restarted.
func TestCmdAdminDeleteSystemTopic(t *testing.T) {
	_, addrs := standalone(t)
	reg := addrs["registry"]
	for _, topic := range []string{"%SYS_STATESTORE", "%SYS_TWIN", "TBW102", "MQTT_SESSION", "MQTT_RETAINED", "MQTT_INGRESS"} {
		code, _, stderr := runCmd(t, "admin", "-registry", reg, "topic", "delete", "-t", topic)
		if code != exitFailure || !strings.Contains(stderr, "system topic") {
			t.Errorf("delete %s: exit %d: %s", topic, code, stderr)
		}
		if code, _, stderr := runCmd(t, "admin", "-registry", reg, "topic", "route", "-t", topic); code != exitOK {
			t.Errorf("route of %s after the refused delete: exit %d: %s", topic, code, stderr)
		}
	}
}

// TestCmdAdminTopicNameError: a topic name with a non-ASCII character is
// refused naming that character (it printed 'Ã', the first byte of 'ü'),
// and a bad name given to topic create or update is bad usage (exit 2)
// naming the flag (it was exit 1 with "admin: topic exists: ...").
func TestCmdAdminTopicNameError(t *testing.T) {
	code, _, stderr := runCmd(t, "admin", "-registry", "127.0.0.1:1", "topic", "create", "-t", "Grüße")
	if code == exitOK || !strings.Contains(stderr, `has "ü" at byte 2`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, verb := range []string{"create", "update"} {
		code, stdout, stderr := runCmd(t, "admin", "-registry", "127.0.0.1:1", "topic", verb, "-t", "bad topic")
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, `-t: client: invalid options: topic name "bad topic" has " "`) ||
			strings.Contains(stderr, "exists") {
			t.Errorf("topic %s -t 'bad topic': exit %d, stdout %q, stderr:\n%s", verb, code, stdout, stderr)
		}
	}
}

// TestCmdAdminControllerNone: `admin controller` against a cluster that
// runs no controller says so (it printed "request type 1005 not
// supported").
func TestCmdAdminControllerNone(t *testing.T) {
	_, addrs := standalone(t)
	reg := addrs["registry"]
	for _, args := range [][]string{{"controller"}, {"controller", "elect", "-group", "broker-a"}} {
		code, _, stderr := runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
		if code != exitFailure || !strings.Contains(stderr, "the cluster has no controller") || strings.Contains(stderr, "not supported") {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}
