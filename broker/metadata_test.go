package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

func fixedClock() func() time.Time {
	t := time.UnixMilli(1_700_000_000_000)
	var mu sync.Mutex
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func openTopics(t *testing.T, dir string, auto bool) *TopicManager {
	t.Helper()
	m, err := OpenTopics(TopicOptions{Dir: dir, BrokerName: "broker-a", ClusterName: "DefaultCluster", AutoCreateTopic: auto, DefaultQueueNums: 4, DelayLevels: 18, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBrokerTopicsSystemTopicsAndPersistence(t *testing.T) {
	dir := t.TempDir()
	m := openTopics(t, dir, true)
	tbw, ok := m.Get(AutoCreateTopicKey)
	if !ok || tbw.Perm != PermRW|PermInherit || tbw.WriteQueueNums != 8 {
		t.Fatalf("TBW102 = %+v, %v", tbw, ok)
	}
	if s, ok := m.Get(ScheduleTopic); !ok || s.ReadQueueNums != 18 {
		t.Fatalf("schedule topic = %+v", s)
	}
	v0 := m.DataVersion()
	if err := m.Update(protocol.TopicConfig{TopicName: "Orders", ReadQueueNums: 8, WriteQueueNums: 8, Perm: PermRW, Order: true}); err != nil {
		t.Fatal(err)
	}
	v1 := m.DataVersion()
	if v1.Counter != v0.Counter+1 || v1.Timestamp <= v0.Timestamp {
		t.Fatalf("data version not bumped: %+v -> %+v", v0, v1)
	}
	// Reopen: everything is back, with the same version.
	m2 := openTopics(t, dir, true)
	tc, ok := m2.Get("Orders")
	if !ok || tc.ReadQueueNums != 8 || !tc.Order || tc.TopicFilterType != protocol.TopicFilterSingleTag {
		t.Fatalf("reloaded Orders = %+v, %v", tc, ok)
	}
	if m2.DataVersion() != v1 {
		t.Fatalf("version after reload %+v, want %+v", m2.DataVersion(), v1)
	}
	if ok, err := m2.Delete("Orders"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, ok := openTopics(t, dir, true).Get("Orders"); ok {
		t.Fatal("deleted topic came back after reopen")
	}
}

// The on-disk format is the RocketMQ wrapper: pin its shape.
func TestBrokerTopicFileFormat(t *testing.T) {
	dir := t.TempDir()
	m := openTopics(t, dir, false)
	if err := m.Update(protocol.TopicConfig{TopicName: "T1", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "topic.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		DataVersion      map[string]int64          `json:"dataVersion"`
		TopicConfigTable map[string]map[string]any `json:"topicConfigTable"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("topic.json is not JSON: %v\n%s", err, data)
	}
	want := map[string]any{"topicName": "T1", "readQueueNums": 2.0, "writeQueueNums": 2.0, "perm": 6.0, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0.0, "order": false}
	got := raw.TopicConfigTable["T1"]
	for k, v := range want {
		if got[k] != v {
			t.Errorf("topic.json T1.%s = %v, want %v (file: %s)", k, got[k], v, data)
		}
	}
	if raw.DataVersion["counter"] == 0 || raw.DataVersion["timestamp"] == 0 {
		t.Errorf("dataVersion missing: %s", data)
	}
	if _, ok := raw.TopicConfigTable[AutoCreateTopicKey]; ok {
		t.Error("TBW102 registered while auto-create is off")
	}
}

func TestBrokerTopicAutoCreate(t *testing.T) {
	m := openTopics(t, t.TempDir(), true)
	tc, err := m.CreateOnSend("NewTopic", AutoCreateTopicKey, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tc.WriteQueueNums != 4 || tc.Perm != PermRW {
		t.Fatalf("auto-created %+v", tc)
	}
	if tc2, _ := m.CreateOnSend("NewTopic", AutoCreateTopicKey, 2, 0); tc2.WriteQueueNums != 4 {
		t.Fatalf("existing topic changed: %+v", tc2)
	}
	// More queues than the template has get the template's count, as the
	// client's route (capped at the template's) sends on: it used to be
	// the default (4), so a producer asking for 16 sent to queues 4..7 of
	// a 4-queue topic.
	tmpl, _ := m.Get(AutoCreateTopicKey)
	for _, ask := range []int32{tmpl.WriteQueueNums + 1, 5000} {
		topic := fmt.Sprintf("Wide%d", ask)
		if tc, err := m.CreateOnSend(topic, AutoCreateTopicKey, ask, 0); err != nil || tc.WriteQueueNums != tmpl.WriteQueueNums || tc.ReadQueueNums != tmpl.WriteQueueNums {
			t.Fatalf("asked %d queues (template %d): %+v %v", ask, tmpl.WriteQueueNums, tc, err)
		}
	}
	if tc, err := m.CreateOnSend("NoCount", AutoCreateTopicKey, 0, 0); err != nil || tc.WriteQueueNums != 4 {
		t.Fatalf("asked 0 queues: %+v %v", tc, err)
	}
	if _, err := m.CreateOnSend("Other", "NoSuchTemplate", 4, 0); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("missing template: %v", err)
	}
	off := openTopics(t, t.TempDir(), false)
	if _, err := off.CreateOnSend("X", AutoCreateTopicKey, 4, 0); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("auto-create off: %v", err)
	}
	if tc, err := off.CreateSystemTopic(RetryTopic("g1"), 1, PermRW); err != nil || tc.TopicName != "%RETRY%g1" {
		t.Fatalf("retry topic: %+v %v", tc, err)
	}
}

func TestBrokerTopicNameRules(t *testing.T) {
	for _, ok := range []string{"a", "Topic_1-x", "%RETRY%g", "a|b", strings.Repeat("x", 127)} {
		if err := ValidateTopicName(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "has space", "dot.ted", "slash/x", strings.Repeat("x", 128), "ü"} {
		if err := ValidateTopicName(bad); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
	// The error names the offending character, not its first byte ('Ã').
	if err := ValidateTopicName("Grüße"); err == nil || !strings.Contains(err.Error(), `has "ü" at byte 2`) {
		t.Errorf("non-ASCII name: %v", err)
	}
	for _, sys := range []string{AutoCreateTopicKey, ScheduleTopic, TransHalfTopic} {
		if err := ValidateSendTopic(sys); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("send to %s allowed", sys)
		}
	}
	m := openTopics(t, t.TempDir(), true)
	if err := m.Update(protocol.TopicConfig{TopicName: "Q", ReadQueueNums: 0, WriteQueueNums: 1}); !errors.Is(err, ErrInvalidTopic) {
		t.Errorf("zero queues accepted: %v", err)
	}
}

func TestBrokerCorruptConfigRefusesToStart(t *testing.T) {
	for _, name := range []string{TopicConfigFile, SubscriptionGroupFile, ConsumerOffsetFile, DelayOffsetFile} {
		// A file cut to zero bytes is damage too: read as "no file" it
		// used to drop every topic (and the messages with them) or every
		// committed offset without a log line.
		for _, content := range []string{`{"topicConfigTable": {`, ""} {
			checkCorruptConfigRefused(t, name, content)
		}
	}
}

func checkCorruptConfigRefused(t *testing.T, name, content string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	switch name {
	case TopicConfigFile:
		_, err = OpenTopics(TopicOptions{Dir: dir})
	case SubscriptionGroupFile:
		_, err = OpenGroups(GroupOptions{Dir: dir})
	case ConsumerOffsetFile:
		_, err = OpenOffsets(dir)
	case DelayOffsetFile:
		_, err = OpenDelayOffsets(dir)
	}
	if !errors.Is(err, ErrCorruptConfig) || !strings.Contains(err.Error(), name) {
		t.Errorf("%s holding %q: err = %v, want ErrCorruptConfig naming the file", name, content, err)
	}
}

func TestBrokerGroups(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenGroups(GroupOptions{Dir: dir, AutoCreate: true, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.FindOrCreate("cg1")
	if err != nil {
		t.Fatal(err)
	}
	if g != DefaultSubscriptionGroup("cg1") || g.RetryMaxTimes != 16 || g.RetryQueueNums != 1 || g.WhichBrokerWhenConsumeSlowly != 1 {
		t.Fatalf("defaults: %+v", g)
	}
	g.RetryMaxTimes = 3
	g.ConsumeEnable = false
	if err := m.Update(g); err != nil {
		t.Fatal(err)
	}
	m2, err := OpenGroups(GroupOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if g2, ok := m2.Get("cg1"); !ok || g2.RetryMaxTimes != 3 || g2.ConsumeEnable {
		t.Fatalf("reloaded %+v %v", g2, ok)
	}
	if _, err := m2.FindOrCreate("cg2"); !errors.Is(err, ErrGroupNotExist) {
		t.Fatalf("auto-create off: %v", err)
	}
	if err := m2.Update(SubscriptionGroupConfig{GroupName: "bad group"}); !errors.Is(err, ErrInvalidGroup) {
		t.Fatalf("bad name: %v", err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, SubscriptionGroupFile))
	for _, key := range []string{`"subscriptionGroupTable"`, `"retryMaxTimes": 3`, `"consumeFromMinEnable"`, `"whichBrokerWhenConsumeSlowly": 1`, `"dataVersion"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("subscriptionGroup.json lacks %s:\n%s", key, data)
		}
	}
}

func TestBrokerOffsets(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Commit("cg", "T", 0, 10)
	m.Commit("cg", "T", 3, 42)
	m.Commit("cg2", "T", 0, 7)
	m.Commit("cg", "U", 1, 5)
	m.Commit("cg", "T", 2, -1) // ignored
	if err := m.Persist(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ConsumerOffsetFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"T@cg"`) || !strings.Contains(string(data), `"3": 42`) {
		t.Fatalf("consumerOffset.json: %s", data)
	}
	m2, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := m2.Query("cg", "T", 3); !ok || o != 42 {
		t.Fatalf("reloaded offset %d %v", o, ok)
	}
	if _, ok := m2.Query("cg", "T", 2); ok {
		t.Fatal("negative commit was stored")
	}
	if g := m2.GroupsOfTopic("T"); strings.Join(g, ",") != "cg,cg2" {
		t.Fatalf("groups of T = %v", g)
	}
	if tp := m2.TopicsOfGroup("cg"); strings.Join(tp, ",") != "T,U" {
		t.Fatalf("topics of cg = %v", tp)
	}
	m2.DeleteTopic("T")
	if _, ok := m2.Query("cg2", "T", 0); ok {
		t.Fatal("offsets of a deleted topic remain")
	}
	// Java writes queue ids as bare numbers; those files load too.
	if err := os.WriteFile(filepath.Join(dir, ConsumerOffsetFile), []byte(`{"offsetTable":{"T@g":{0:5,1:6}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m3, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := m3.Query("g", "T", 1); !ok || o != 6 {
		t.Fatalf("bare-key file: %d %v", o, ok)
	}
}

func TestBrokerOffsetsConcurrentCommitAndPersist(t *testing.T) {
	m, err := OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				m.Commit("g", "T", int32(w), int64(i))
				if i%100 == 0 {
					if err := m.Persist(); err != nil {
						t.Error(err)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	for w := int32(0); w < 8; w++ {
		if o, _ := m.Query("g", "T", w); o != 499 {
			t.Fatalf("queue %d offset %d", w, o)
		}
	}
}

func TestBrokerDelayOffsets(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	d.Set(1, 100)
	d.Set(18, 3)
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	d2, err := OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Get(1) != 100 || d2.Get(18) != 3 || d2.Get(2) != 0 {
		t.Fatalf("reloaded %v %v %v", d2.Get(1), d2.Get(18), d2.Get(2))
	}
	// GET_ALL_DELAY_OFFSET's answer is what a slave's Replace installs.
	resp, err := (&Broker{delayOffsets: d2}).delayOffsetsResponse()
	if err != nil || !strings.Contains(string(resp.Body), `"offsetTable"`) {
		t.Fatalf("GET_ALL_DELAY_OFFSET body %s %v", resp.Body, err)
	}
	js := resp.Body
	d3, _ := OpenDelayOffsets(t.TempDir())
	if err := d3.Replace(js); err != nil || d3.Get(1) != 100 {
		t.Fatalf("replace: %v %d", err, d3.Get(1))
	}
	if err := d3.Replace([]byte("{nope")); !errors.Is(err, ErrCorruptConfig) {
		t.Fatalf("bad json: %v", err)
	}
}

// Persist writes delayOffset.json only when the offsets changed: the
// housekeeping loop calls it every few seconds, and an idle broker must
// not rewrite and fsync an unchanged file each time.
func TestBrokerDelayOffsetsPersistOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DelayOffsetFile)
	d, err := OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	first, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the first Persist creates the file: %v", err)
	}
	d.Set(3, 7)
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	changed, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(first, changed) {
		t.Fatal("a changed offset was not written")
	}
	d.Set(3, 7) // the same value: nothing to write
	if err := d.Persist(); err != nil {
		t.Fatal(err)
	}
	same, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(changed, same) {
		t.Fatal("an unchanged table was rewritten")
	}
	// Reopened from its file, the table is clean until it changes.
	d2, err := OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Persist(); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Stat(path); !os.SameFile(same, again) {
		t.Fatal("a reopened, unchanged table was rewritten")
	}
	if d2.Get(3) != 7 {
		t.Fatalf("reloaded %d", d2.Get(3))
	}
}

// The registration CRC is masked to 31 bits like Java's UtilAll.crc32: a
// body whose IEEE CRC has the top bit set must still give a positive value.
func TestBrokerRegistrationCRC(t *testing.T) {
	body := []byte("123456789") // IEEE CRC-32 0xCBF43926: top bit set
	if got := registrationCRC(body); got != 0x4BF43926 {
		t.Fatalf("registrationCRC = %#x, want 0x4BF43926", got)
	}
}

// A group's retry topic, %RETRY%<group>, must be a valid topic: a group
// has at most 120 characters (TestInteropConsumerGroupNameFitsItsRetryTopic).
func TestBrokerGroupNameFitsItsRetryTopic(t *testing.T) {
	longest := strings.Repeat("g", MaxGroupLength)
	if err := ValidateGroupName(longest); err != nil {
		t.Fatalf("%d characters refused: %v", len(longest), err)
	}
	if err := ValidateTopicName(RetryTopic(longest)); err != nil {
		t.Fatalf("retry topic of the longest group: %v", err)
	}
	if err := ValidateGroupName(longest + "g"); !errors.Is(err, ErrInvalidGroup) || !strings.Contains(err.Error(), "at most 120") {
		t.Fatalf("%d characters: %v", len(longest)+1, err)
	}
}

// A heartbeat with a group name the broker refuses (121 characters: its
// retry topic could not exist) is answered with the error, and the
// client's other groups and its producers are registered all the same.
func TestBrokerHeartbeatBadGroupRegistersTheRest(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	tc := newTestClient(t, b.Addr())
	sub := []*protocol.SubscriptionData{{Topic: "S", SubString: "*", ExpressionType: "TAG", SubVersion: 1}}
	cd := func(g string) *protocol.ConsumerData {
		return &protocol.ConsumerData{GroupName: g, ConsumeType: protocol.ConsumePassively, MessageModel: protocol.MessageModelClustering,
			ConsumeFromWhere: protocol.ConsumeFromFirstOffset, SubscriptionDataSet: sub}
	}
	long := strings.Repeat("g", MaxGroupLength+1)
	body, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: "10.0.0.9@hb",
		ConsumerDataSet: []*protocol.ConsumerData{cd(long), cd("good-after")},
		ProducerDataSet: []*protocol.ProducerData{{GroupName: "pg-hb"}}})
	if err != nil {
		t.Fatal(err)
	}
	resp := tc.invoke(protocol.HeartBeat, nil, body)
	if resp.Code == protocol.Success || !strings.Contains(resp.Remark, "at most 120") {
		t.Fatalf("heartbeat with a 121-character group: %d %q", resp.Code, resp.Remark)
	}
	if ids := b.consumers.ClientIDs("good-after"); len(ids) != 1 {
		t.Fatalf("the group after the refused one: members %v", ids)
	}
	if ids := b.consumers.ClientIDs(long); len(ids) != 0 {
		t.Fatalf("the refused group has members %v", ids)
	}
	if cs := b.producers.Clients("pg-hb"); len(cs) != 1 || cs[0].ClientID != "10.0.0.9@hb" {
		t.Fatalf("the heartbeat's producer: %+v", cs)
	}
}

// A group longer than MaxGroupLength that the broker already keeps (from
// before the limit) is still served and can be updated; one it does not
// keep is refused, as is one past the topic rule.
func TestBrokerGroupKeptFromBeforeTheLimit(t *testing.T) {
	dir := t.TempDir()
	kept := strings.Repeat("k", MaxTopicLength)
	w := SubscriptionGroupWrapper{SubscriptionGroupTable: map[string]*SubscriptionGroupConfig{}}
	g := DefaultSubscriptionGroup(kept)
	w.SubscriptionGroupTable[kept] = &g
	if err := writeConfig(filepath.Join(dir, SubscriptionGroupFile), w); err != nil {
		t.Fatal(err)
	}
	m, err := OpenGroups(GroupOptions{Dir: dir, AutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ValidateName(kept); err != nil {
		t.Fatalf("kept group of %d characters: %v", len(kept), err)
	}
	g.RetryMaxTimes = 3
	if err := m.Update(g); err != nil {
		t.Fatalf("update of the kept group: %v", err)
	}
	if !LongGroup(kept) || LongGroup(kept[:MaxGroupLength]) {
		t.Fatal("LongGroup disagrees with MaxGroupLength")
	}
	for _, bad := range []string{strings.Repeat("n", MaxGroupLength+1), kept + "k"} {
		if err := m.ValidateName(bad); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("group of %d characters the broker does not keep: %v", len(bad), err)
		}
		if _, err := m.FindOrCreate(bad); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("auto-create of a group of %d characters: %v", len(bad), err)
		}
	}
}

// A group named with a retry or dead-letter topic's prefix is refused
// from any client (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, a pull, a
// heartbeat); one the broker kept from before the rule is still served.
func TestBrokerGroupReservedPrefixRefused(t *testing.T) {
	dir := t.TempDir()
	kept := DLQGroupPrefix + "old"
	w := SubscriptionGroupWrapper{SubscriptionGroupTable: map[string]*SubscriptionGroupConfig{}}
	g := DefaultSubscriptionGroup(kept)
	w.SubscriptionGroupTable[kept] = &g
	if err := writeConfig(filepath.Join(dir, "config", SubscriptionGroupFile), w); err != nil {
		t.Fatal(err)
	}
	b := testBroker(t, dir, nil)
	c := newTestClient(t, b.Addr())
	for _, name := range []string{RetryGroupPrefix + "x", DLQGroupPrefix + "x", RetryGroupPrefix} {
		body, err := protocol.EncodeJSON(DefaultSubscriptionGroup(name))
		if err != nil {
			t.Fatal(err)
		}
		resp := c.invoke(protocol.UpdateAndCreateSubscriptionGroup, nil, body)
		if resp.Code == protocol.Success || !strings.Contains(resp.Remark, "prefixes of a group's retry and dead-letter topics") {
			t.Fatalf("create group %q: %d %q, want refused naming the prefixes", name, resp.Code, resp.Remark)
		}
		if _, ok := b.groups.Get(name); ok {
			t.Fatalf("group %q created", name)
		}
		if _, err := b.groups.FindOrCreate(name); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("auto-create of %q: %v", name, err)
		}
	}
	if err := b.groups.ValidateName(kept); err != nil {
		t.Fatalf("group %q kept from before the rule: %v", kept, err)
	}
	body, err := protocol.EncodeJSON(DefaultSubscriptionGroup("plain%name"))
	if err != nil {
		t.Fatal(err)
	}
	if resp := c.invoke(protocol.UpdateAndCreateSubscriptionGroup, nil, body); resp.Code != protocol.Success {
		t.Fatalf("a group with %% inside: %d %q", resp.Code, resp.Remark)
	}
}
