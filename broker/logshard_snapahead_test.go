package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/store"
)

// TestShardSnapshotAheadOfLogReplaysLog: a shard snapshot that covers
// entries its log no longer has (the store's recovery cut a damaged tail
// after the snapshot was written) is dropped at start while the whole log
// is there (set aside, not deleted, for an operator): the shard comes up with what the log holds, takes writes at
// the log's end (it used to append at the log's end, expect the
// snapshot's NEXT and stop the shard: "entry stored at queue offset 1,
// expected 2"), and a restart after the log grew past the stale
// snapshot's NEXT does not load it again.
func TestShardSnapshotAheadOfLogReplaysLog(t *testing.T) {
	sync, one, snap := snapSyncFlush, snapOneShard, shardSnapPath

	// ahead: a snapshot of a shard with two entries.
	ahead := t.TempDir()
	b := testBroker(t, ahead, sync)
	s := ssOpen(t, b, one)
	ssDo(t, s, "c", "SET", "a", "1")
	ssDo(t, s, "c", "SET", "b", "2")
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	stale, err := os.ReadFile(snap(ahead))
	if err != nil {
		t.Fatalf("no snapshot written: %v", err)
	}
	s.stop()
	_ = b.Close()

	// dir: the same shard whose log ends after the first entry, with the
	// snapshot of two.
	dir := t.TempDir()
	b = testBroker(t, dir, sync)
	s = ssOpen(t, b, one)
	ssDo(t, s, "c", "SET", "a", "1")
	s.stop() // no snapshot of its own
	_ = b.Close()
	if err := os.WriteFile(snap(dir), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	// Older set-aside snapshots: only the newest snapAsideKeep stay.
	for i := 1; i <= snapAsideKeep+1; i++ {
		if err := os.WriteFile(fmt.Sprintf("%s.ahead-%d", snap(dir), i), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	b = testBroker(t, dir, sync)
	s = ssOpen(t, b, one)
	if v, _ := ssDo(t, s, "c", "GET", "b"); v.Str != nil {
		t.Fatalf("GET b = %q: the state is the stale snapshot's, not the log's", v.Str)
	}
	ssDo(t, s, "c", "SET", "c", "3") // t.Fatal when the shard stops
	ssDo(t, s, "c", "SET", "d", "4")
	if _, err := os.Stat(snap(dir)); err == nil {
		t.Error("the stale snapshot is still there")
	}
	// It was set aside, not deleted: it may be the only copy of
	// acknowledged writes from the cut tail.
	aside, _ := filepath.Glob(snap(dir) + ".ahead-*")
	if len(aside) != snapAsideKeep {
		t.Errorf("set-aside snapshots %v, want %d", aside, snapAsideKeep)
	}
	kept := false
	for _, a := range aside {
		if data, err := os.ReadFile(a); err == nil && bytes.Equal(data, stale) {
			kept = true
		}
		if strings.HasSuffix(a, ".ahead-1") || strings.HasSuffix(a, ".ahead-2") {
			t.Errorf("an older set-aside snapshot %s kept over a newer one", a)
		}
	}
	if !kept {
		t.Errorf("the snapshot ahead of the log is not among the set-aside ones %v", aside)
	}
	s.stop() // no snapshot: the log (3 entries) alone rebuilds the shard
	_ = b.Close()

	b = testBroker(t, dir, sync)
	s = ssOpen(t, b, one)
	for k, want := range map[string]string{"a": "1", "b": "", "c": "3", "d": "4"} {
		if v, _ := ssDo(t, s, "c", "GET", k); string(v.Str) != want {
			t.Errorf("after restart GET %s = %q, want %q", k, v.Str, want)
		}
	}
	ssDo(t, s, "c", "SET", "e", "5")
}

// The options and the snapshot file of the shard snapshot tests: a broker
// whose every put is on disk when answered (the cuts below keep exactly
// the records they mean to), a state store of one shard, and its file.
func snapSyncFlush(o *Options)          { o.Store.FlushMode = store.FlushSync }
func snapOneShard(o *StateStoreOptions) { o.Shards = 1 }
func shardSnapPath(dir string) string {
	return filepath.Join(dir, "statestore", "shard-0.snap")
}
