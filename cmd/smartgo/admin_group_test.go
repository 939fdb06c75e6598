package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

// TestCmdAdminGroupLifecycle: what docs/protocols.md tells a user to do so
// that a new consumer group starts later than a young queue's first
// message, with smartgo admin alone: `group create`, then `offset reset`,
// then the consumers start (there was no command to create a group, and
// `offset reset` refuses a group no broker knows). Then `group list` and
// `group delete` (mqadmin deleteSubGroup: the config, the offsets and the
// group's retry topic go).
func TestCmdAdminGroupLifecycle(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	admin := func(args ...string) (int, string, string) {
		t.Helper()
		return runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
	}
	mustAdmin := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := admin(args...)
		if code != exitOK {
			t.Fatalf("admin %v: exit %d: %s", args, code, stderr)
		}
		return stdout
	}
	mustAdmin("topic", "create", "-t", "GroupT", "-r", "2", "-w", "2", "-c", "TestCluster") // mqadmin's -c for -cluster
	p := testProducer(t, c.RegistryAddrs())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := func(body string) {
		if _, err := p.Send(ctx, &client.Message{Topic: "GroupT", Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		send(fmt.Sprint("before-", i))
	}
	cut := time.Now().UnixMilli() + 1
	for time.Now().UnixMilli() <= cut {
		time.Sleep(time.Millisecond)
	}
	for i := range 4 {
		send(fmt.Sprint("after-", i))
	}

	if code, _, stderr := admin("offset", "reset", "-g", "late", "-t", "GroupT", "-ts", fmt.Sprint(cut)); code != exitFailure ||
		!strings.Contains(stderr, "consumer group does not exist") {
		t.Fatalf("reset of an unknown group: exit %d: %s", code, stderr)
	}
	if out := mustAdmin("group", "create", "-g", "late", "-retry", "3"); !strings.Contains(out, "group late: ok (created)") {
		t.Fatalf("group create: %q", out)
	}
	// mqadmin's -n (name server list, ';' between several) is -registry.
	code, out, stderr := runCmd(t, "admin", "-n", strings.Join(c.RegistryAddrs(), ";"), "group", "update", "-g", "late", "-retry", "3")
	if code != exitOK || !strings.Contains(out, "group late: ok (updated)") {
		t.Fatalf("group update -n: exit %d: %q %s", code, out, stderr)
	}
	var groups []struct {
		Name          string   `json:"name"`
		Brokers       []string `json:"brokers"`
		RetryMaxTimes int32    `json:"retryMaxTimes"`
	}
	if err := json.Unmarshal([]byte(mustAdmin("group", "list", "-o", "json")), &groups); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups {
		if g.Name == "late" {
			found = g.RetryMaxTimes == 3 && len(g.Brokers) == 1
		}
	}
	if !found {
		t.Fatalf("group list: %+v", groups)
	}
	mustAdmin("offset", "reset", "-g", "late", "-t", "GroupT", "-ts", fmt.Sprint(cut))

	// A consumer of the group that reads from the first message when it
	// has no offsets starts at the reset instead.
	var mu sync.Mutex
	seen := map[string]int{}
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()},
		Group: "late", From: client.ConsumeFromFirst, PersistInterval: 100 * time.Millisecond},
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
	if err := pc.Subscribe("GroupT", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the four messages after the reset time", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for i := range 4 {
			n += min(seen[fmt.Sprint("after-", i)], 1)
		}
		return n == 4
	})
	mu.Lock()
	for i := range 3 {
		if seen[fmt.Sprint("before-", i)] > 0 {
			t.Errorf("before-%d consumed by a group reset past it: %v", i, seen)
		}
	}
	mu.Unlock()
	pc.Close()
	// -ts now skips what is stored (mqadmin skipAccumulatedMessage).
	send("later")
	for sentBy := time.Now().UnixMilli(); time.Now().UnixMilli() <= sentBy+1; { // "now" is after its store time
		time.Sleep(time.Millisecond)
	}
	mustAdmin("offset", "reset", "-g", "late", "-t", "GroupT", "-ts", "now")
	var prog struct {
		TotalLag int64 `json:"totalLag"`
	}
	if err := json.Unmarshal([]byte(mustAdmin("group", "progress", "-g", "late", "-t", "GroupT", "-o", "json")), &prog); err != nil || prog.TotalLag != 0 {
		t.Fatalf("lag after a reset to now: %+v %v", prog, err)
	}
	// A topic that does not exist is an error, not an empty table.
	if code, _, stderr := admin("group", "progress", "-g", "late", "-t", "NoSuchT"); code != exitFailure || !strings.Contains(stderr, "topic does not exist") {
		t.Fatalf("progress on a topic that does not exist: exit %d: %s", code, stderr)
	}

	out = mustAdmin("group", "delete", "-g", "late")
	if !strings.Contains(out, "group late deleted") {
		t.Fatalf("group delete: %q", out)
	}
	if code, _, stderr := admin("group", "progress", "-g", "late"); code != exitFailure || !strings.Contains(stderr, "consumer group does not exist") {
		t.Fatalf("progress of the deleted group: exit %d: %s", code, stderr)
	}
	if topics := mustAdmin("topic", "list"); strings.Contains(topics, "%RETRY%late") {
		t.Fatalf("the deleted group's retry topic is still listed:\n%s", topics)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"group", "delete", "-g", "late"}, exitFailure, "consumer group does not exist: late"},
		{[]string{"group", "delete"}, exitUsage, "-g is required"},
		{[]string{"group", "create", "-g", "bad group"}, exitFailure, "group name"},
		{[]string{"group", "create", "-g", "g1", "-retry", "65"}, exitUsage, "-retry must be between 0 and 64"},
		{[]string{"group", "create", "-g", "g1", "-c", "NoSuchCluster"}, exitFailure, `no master broker in cluster "NoSuchCluster": the registries know no such cluster (they know TestCluster)`},
		{[]string{"topic", "create", "-t", "T1", "-cluster", "NoSuchCluster"}, exitFailure, `the registries know no such cluster (they know TestCluster)`},
	} {
		code, stdout, stderr := admin(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("admin %s: exit %d (want %d), stdout %q, stderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
		}
	}
}

// TestCmdAdminMQAdminNames: a RocketMQ user's mqadmin command names get
// the smartgo admin command that does the same (the error used to name
// the command with its first flag, `unknown command "updateTopic -t"`),
// and every command named so exists.
func TestCmdAdminMQAdminNames(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"updateTopic", "-n", "127.0.0.1:9876", "-t", "X"}, `unknown command "updateTopic" (mqadmin's updateTopic is 'smartgo admin topic create'`},
		{[]string{"deleteSubGroup", "-g", "X"}, `unknown command "deleteSubGroup" (mqadmin's deleteSubGroup is 'smartgo admin group delete'`},
		{[]string{"getBrokerConfig", "-b", "127.0.0.1:10911"}, `unknown command "getBrokerConfig" (mqadmin's getBrokerConfig is 'smartgo admin broker config'`},
		{[]string{"statsAll", "-n", "127.0.0.1:9876"}, `unknown command "statsAll" (an mqadmin command: smartgo admin has no statsAll`},
		{[]string{"frob", "-t", "X"}, `unknown command "frob"` + "\n"},
		{[]string{"topic", "frob", "-t", "X"}, `unknown command "topic frob"` + "\n"},
		{[]string{"topic", "-t", "X"}, "smartgo admin topic: which one?"},
	} {
		code, stdout, stderr := runCmd(t, append([]string{"admin"}, tc.args...)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("admin %s: exit %d, stdout %q, stderr:\n%s", strings.Join(tc.args, " "), code, stdout, stderr)
		}
	}
	for name, equiv := range mqadminCommands {
		if equiv == "" {
			continue
		}
		words := strings.Fields(equiv)
		if len(words) > 1 && strings.HasPrefix(words[1], "-") {
			words = words[:1]
		}
		if len(words) > 2 && strings.HasPrefix(words[2], "-") {
			words = words[:2]
		}
		if _, ok := adminTable[strings.Join(words, " ")]; !ok {
			t.Errorf("mqadmin %s maps to %q, which is no admin command", name, equiv)
		}
	}
}

// TestCmdAdminKeptLongGroup: a consumer group of 121-127 characters that
// the broker already keeps (subscriptionGroup.json from before the
// 120-character limit) can be updated with `group create`, like any
// group; a new one that long is refused by the broker, with its reason.
// admin refused both itself ("want 1 to 120 characters").
func TestCmdAdminKeptLongGroup(t *testing.T) {
	kept := "kept" + strings.Repeat("g", 121)
	dir := t.TempDir()
	raw, err := json.Marshal(map[string]any{"subscriptionGroupTable": map[string]any{kept: map[string]any{
		"groupName": kept, "consumeEnable": true, "consumeBroadcastEnable": true, "retryQueueNums": 1, "retryMaxTimes": 16}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "broker-0", "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broker-0", "config", "subscriptionGroup.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "group", "create", "-g", kept, "-retry", "3"); code != exitOK {
		t.Fatalf("update of the kept 125-character group: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCmd(t, "admin", "-registry", reg, "-o", "json", "group", "list")
	if code != exitOK || !strings.Contains(stdout, kept) {
		t.Fatalf("group list: exit %d: %s%s", code, stdout, stderr)
	}
	fresh := "fresh" + strings.Repeat("g", 120)
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "group", "create", "-g", fresh); code != exitFailure || !strings.Contains(stderr, "at most 120") {
		t.Fatalf("create of a new 125-character group: exit %d: %s", code, stderr)
	}
}
