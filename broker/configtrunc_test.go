package broker

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Every metadata file, written by the broker with real content and then
// cut anywhere (a crash of a tool rewriting it in place, a damaged copy)
// or replaced by JSON that is not an object, is refused at start with
// ErrCorruptConfig naming the file: never loaded as an empty or partial
// table (topics no longer routed, consumer offsets reset).
func TestBrokerConfigCutAnywhereRefused(t *testing.T) {
	golden := t.TempDir()
	tm := openTopics(t, golden, false)
	for _, name := range []string{"orders", "payments"} {
		if err := tm.Update(protocol.TopicConfig{TopicName: name, ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRW}); err != nil {
			t.Fatal(err)
		}
	}
	gm, err := OpenGroups(GroupOptions{Dir: golden, AutoCreate: true, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gm.FindOrCreate("billing"); err != nil {
		t.Fatal(err)
	}
	om, err := OpenOffsets(golden)
	if err != nil {
		t.Fatal(err)
	}
	om.Commit("billing", "orders", 0, 12)
	om.Commit("billing", "orders", 3, 7)
	if err := om.Persist(); err != nil {
		t.Fatal(err)
	}
	dm, err := OpenDelayOffsets(golden)
	if err != nil {
		t.Fatal(err)
	}
	dm.Set(1, 34)
	dm.Set(3, 5)
	if err := dm.Persist(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{TopicConfigFile, SubscriptionGroupFile, ConsumerOffsetFile, DelayOffsetFile} {
		full, err := os.ReadFile(filepath.Join(golden, name))
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(full) {
			checkCorruptConfigRefused(t, name, string(full[:n]))
		}
		for _, garbage := range []string{"null", "[]", "0", `""`, "true", " \n", "\x00\x00\x00\x00"} {
			checkCorruptConfigRefused(t, name, garbage)
		}
	}
}

// FuzzBrokerConfigFiles: whatever bytes a metadata file holds, opening
// it never panics; it is either refused with ErrCorruptConfig naming the
// file, or it was a JSON object and what loaded persists and opens again.
func FuzzBrokerConfigFiles(f *testing.F) {
	f.Add(byte(0), []byte(`{"dataVersion":{"timestamp":1,"counter":2},"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6}}}`))
	f.Add(byte(1), []byte(`{"subscriptionGroupTable":{"g":{"groupName":"g","consumeEnable":true}}}`))
	f.Add(byte(2), []byte(`{"offsetTable":{"T@g":{0:12,"3":7}}}`))
	f.Add(byte(3), []byte(`{"offsetTable":{1:34,"3":5}}`))
	f.Add(byte(2), []byte(`{"offsetTable":{"Tg":{"0":1}}}`))
	f.Add(byte(0), []byte(`null`))
	f.Add(byte(1), []byte(`{"subscriptionGroupTable":{"g":`))
	names := []string{TopicConfigFile, SubscriptionGroupFile, ConsumerOffsetFile, DelayOffsetFile}
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		name := names[int(which)%len(names)]
		dir := t.TempDir()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		open := func() error {
			switch name {
			case TopicConfigFile:
				_, err := OpenTopics(TopicOptions{Dir: dir})
				return err
			case SubscriptionGroupFile:
				m, err := OpenGroups(GroupOptions{Dir: dir})
				if err == nil {
					err = m.persist()
				}
				return err
			case ConsumerOffsetFile:
				m, err := OpenOffsets(dir)
				if err == nil {
					err = m.Persist()
				}
				return err
			default:
				m, err := OpenDelayOffsets(dir)
				if err == nil {
					m.Set(1, 1) // a change, so Persist writes
					err = m.Persist()
				}
				return err
			}
		}
		err := open()
		if err != nil {
			if !errors.Is(err, ErrCorruptConfig) || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s holding %q: %v, want ErrCorruptConfig naming the file", name, data, err)
			}
			return
		}
		if trim := bytes.TrimLeft(data, " \t\r\n"); len(trim) == 0 || trim[0] != '{' {
			t.Fatalf("%s holding %q (not an object) accepted", name, data)
		}
		if err := open(); err != nil {
			t.Fatalf("%s: what loaded from %q does not open again after a persist: %v", name, data, err)
		}
	})
}
