package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A topic change whose file cannot be written (a full disk; here the
// config directory made impossible to create) is refused and changes
// nothing: it used to stay in memory after the error, so an admin told
// "failed" saw the topic registered once the disk had room, and it
// vanished at the next restart.
func TestBrokerTopicChangeNotPersistedIsTakenBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	m := openTopics(t, dir, true)
	tc := func(name string, queues int32) protocol.TopicConfig {
		return protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: PermRW}
	}
	if err := m.Update(tc("Kept", 4)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil { // writes under dir now fail
		t.Fatal(err)
	}
	version := m.DataVersion()
	if err := m.Update(tc("New", 4)); err == nil {
		t.Fatal("Update persisted into a file")
	}
	if _, ok := m.Get("New"); ok {
		t.Error("a topic whose creation failed exists")
	}
	if err := m.Update(tc("Kept", 8)); err == nil {
		t.Fatal("Update persisted into a file")
	}
	if got, _ := m.Get("Kept"); got.WriteQueueNums != 4 {
		t.Errorf("a failed update changed the topic: %+v", got)
	}
	if ok, err := m.Delete("Kept"); !ok || err == nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	if _, ok := m.Get("Kept"); !ok {
		t.Error("a failed delete removed the topic")
	}
	if _, err := m.CreateOnSend("Auto", AutoCreateTopicKey, 4, 0); err == nil {
		t.Fatal("CreateOnSend persisted into a file")
	}
	if _, err := m.CreateSystemTopic(RetryTopic("g"), 1, PermRW); err == nil {
		t.Fatal("CreateSystemTopic persisted into a file")
	}
	for _, name := range []string{"Auto", RetryTopic("g")} {
		if _, ok := m.Get(name); ok {
			t.Errorf("%s exists after its creation failed", name)
		}
	}
	if v := m.DataVersion(); v.Counter == version.Counter {
		t.Error("data version unchanged: registrations would not tell the registries the table moved back")
	}

	// Room again: changes persist, and a restart finds exactly them.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(tc("Later", 2)); err != nil {
		t.Fatal(err)
	}
	again := openTopics(t, dir, true)
	for name, want := range map[string]bool{"Kept": true, "Later": true, "New": false, "Auto": false, RetryTopic("g"): false} {
		if _, ok := again.Get(name); ok != want {
			t.Errorf("after a restart %s exists: %v, want %v", name, ok, want)
		}
	}
}
