package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStoreQueueManifestPinned pins the bytes of the queue manifest and
// checks that a torn or altered one is refused.
func TestStoreQueueManifestPinned(t *testing.T) {
	b := appendQueueManifest(nil, []queueEnd{{"TopicA", 3, 7}, {"TopicA", 0, 12}})
	want := "smartgo-queues 1\nTopicA 0 12\nTopicA 3 7\ncrc 8ffcfab1\n"
	if string(b) != want {
		t.Fatalf("manifest %q, want %q", b, want)
	}
	qs, err := parseQueueManifest(b)
	if err != nil || len(qs) != 2 || qs[0] != (queueEnd{"TopicA", 0, 12}) || qs[1] != (queueEnd{"TopicA", 3, 7}) {
		t.Fatalf("parse: %v %v", qs, err)
	}
	if qs, err := parseQueueManifest(appendQueueManifest(nil, nil)); err != nil || len(qs) != 0 {
		t.Fatalf("empty manifest: %v %v", qs, err)
	}
	for name, bad := range map[string]string{
		"torn":          want[:len(want)-5],
		"altered":       strings.Replace(want, "12", "13", 1),
		"empty":         "",
		"no crc":        "smartgo-queues 1\n",
		"other version": "smartgo-queues 2\ncrc 00000000\n",
	} {
		if _, err := parseQueueManifest([]byte(bad)); err == nil {
			t.Errorf("%s manifest accepted", name)
		}
	}
}

// A consume queue lost while the store was closed cleanly (its directory
// or its last files deleted) is rebuilt from the commitlog at the next
// Open and reported; it used to stay missing, its messages stored but out
// of every queue, because a clean start re-dispatches only after the
// queues' last entries.
func TestStoreQueueLostAfterCleanShutdownRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(root string) error
	}{
		{"queue directory deleted", func(root string) error {
			return os.RemoveAll(filepath.Join(root, "consumequeue", "T", "2"))
		}},
		{"queue files deleted", func(root string) error {
			dir := filepath.Join(root, "consumequeue", "T", "2")
			files, err := os.ReadDir(dir)
			for _, f := range files {
				err = os.Remove(filepath.Join(dir, f.Name()))
			}
			return err
		}},
		{"last queue file deleted", func(root string) error {
			dir := filepath.Join(root, "consumequeue", "T", "1")
			files, err := os.ReadDir(dir)
			if err != nil || len(files) < 2 {
				return fmt.Errorf("queue files %d: %v", len(files), err)
			}
			return os.Remove(filepath.Join(dir, files[len(files)-1].Name()))
		}},
		{"every queue deleted", func(root string) error { return os.RemoveAll(filepath.Join(root, "consumequeue")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := openTest(t, root, nil)
			const perQueue = 150 // 64 entries per queue file: three files a queue
			for i := 0; i < perQueue; i++ {
				for q := int32(0); q < 4; q++ {
					mustPut(t, s, msgSpec{topic: "T", qid: q, body: fmt.Sprintf("q%d-%d", q, i)})
				}
			}
			waitDispatched(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(root); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, root, nil)
			for q := int32(0); q < 4; q++ {
				got := readAll(t, s, "T", q)
				if len(got) != perQueue {
					t.Fatalf("queue %d: %d messages after the restart, want %d", q, len(got), perQueue)
				}
				for i, m := range got {
					if want := fmt.Sprintf("q%d-%d", q, i); string(m.Body) != want {
						t.Fatalf("queue %d offset %d: %q, want %q", q, i, m.Body, want)
					}
				}
			}
			rep := s.RecoveryReport()
			if tc.name != "every queue deleted" && (len(rep.Corruptions) == 0 || rep.Abnormal) {
				t.Fatalf("lost queue not reported: %+v", rep)
			}
			// The next clean start finds every queue whole: nothing reported.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, root, nil)
			if rep := s.RecoveryReport(); len(rep.Corruptions) != 0 || rep.Redispatched != 0 {
				t.Fatalf("second clean start: %+v", rep)
			}
		})
	}
}

// A damaged manifest is reported and every queue is checked against the
// commitlog; after a crash the manifest of an older shutdown is ignored.
func TestStoreQueueManifestDamagedOrStale(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	for i := 0; i < 40; i++ {
		mustPut(t, s, msgSpec{topic: "T", qid: int32(i % 2), body: "x"})
	}
	waitDispatched(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, queueManifestName)
	if err := os.WriteFile(path, []byte("smartgo-queues 1\nT 0 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, nil)
	rep := s.RecoveryReport()
	if len(rep.Corruptions) != 1 || !strings.Contains(rep.Corruptions[0].Error(), "queue manifest") || rep.DispatchFrom != 0 {
		t.Fatalf("damaged manifest: %+v", rep)
	}
	if got := len(readAll(t, s, "T", 0)) + len(readAll(t, s, "T", 1)); got != 40 {
		t.Fatalf("%d messages, want 40", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A manifest claiming more than the queues hold, with the abort marker
	// of a crash: the crash recovery does not read it.
	if err := os.WriteFile(path, appendQueueManifest(nil, []queueEnd{{"T", 0, 1000}, {"Gone", 0, 5}}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, abortName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, nil)
	if rep := s.RecoveryReport(); !rep.Abnormal || len(rep.Corruptions) != 0 {
		t.Fatalf("crash recovery with a stale manifest: %+v", rep)
	}
}

// FuzzStoreQueueManifest: any bytes are refused or parsed, and what parses
// encodes back to a manifest that parses to the same queues.
func FuzzStoreQueueManifest(f *testing.F) {
	f.Add(appendQueueManifest(nil, []queueEnd{{"TopicA", 0, 12}, {"%RETRY%g", 3, 7}}))
	f.Add(appendQueueManifest(nil, nil))
	f.Add([]byte("smartgo-queues 1\nT 0 1\ncrc 00000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		qs, err := parseQueueManifest(b)
		if err != nil {
			return
		}
		enc := appendQueueManifest(nil, qs) // sorts qs
		again, err := parseQueueManifest(enc)
		if err != nil || !slices.Equal(again, qs) {
			t.Fatalf("round trip of %v: %v %v", qs, again, err)
		}
	})
}
