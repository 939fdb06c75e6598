package broker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestShardReloadAfterCutSetsSnapshotAside: a replica whose HA client cuts
// its log's tail (store.TruncateTail, then the hosted services' truncated,
// as ha.Client.converge and the broker's afterTruncate do in controller
// mode when a newly elected master's log ends earlier)
// reloads every shard with entries in the cut: its state is what the log
// still holds, a snapshot that covers the cut entries is set aside (it may
// be the only copy of SETs acknowledged from the cut tail), not loaded and
// not deleted, writes go on at the log's end, and a restart comes up with
// the same state.
func TestShardReloadAfterCutSetsSnapshotAside(t *testing.T) {
	sync, one := snapSyncFlush, snapOneShard
	dir := t.TempDir()
	snap := shardSnapPath(dir)

	b := testBroker(t, dir, sync)
	s := ssOpen(t, b, one)
	ssDo(t, s, "c", "SET", "a", "1")
	cut := b.store.MaxPhysicalOffset() // the record of SET b starts here
	ssDo(t, s, "c", "SET", "b", "2")
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	stale, err := os.ReadFile(snap)
	if err != nil {
		t.Fatalf("no snapshot written: %v", err)
	}

	if err := b.store.TruncateTail(cut); err != nil {
		t.Fatalf("truncate at %d: %v", cut, err)
	}
	if err := s.truncated(cut); err != nil { // what afterTruncate calls in controller mode
		t.Fatalf("after the cut: %v", err)
	}
	if v, _ := ssDo(t, s, "c", "GET", "b"); v.Str != nil {
		t.Fatalf("GET b = %q after the cut took it: the shard kept the snapshot's state", v.Str)
	}
	if v, _ := ssDo(t, s, "c", "GET", "a"); string(v.Str) != "1" {
		t.Fatalf("GET a = %q after the cut, want 1", v.Str)
	}
	if _, err := os.Stat(snap); err == nil {
		t.Error("the snapshot ahead of the cut log is still in place")
	}
	aside, _ := filepath.Glob(snap + ".ahead-*")
	if len(aside) != 1 {
		t.Fatalf("set-aside snapshots %v, want the one ahead of the cut", aside)
	}
	if data, err := os.ReadFile(aside[0]); err != nil || !bytes.Equal(data, stale) {
		t.Errorf("the set-aside file %s is not the snapshot ahead of the cut (%v)", aside[0], err)
	}
	ssDo(t, s, "c", "SET", "c", "3") // t.Fatal when the shard stopped
	s.stop()
	_ = b.Close()

	b = testBroker(t, dir, sync)
	s = ssOpen(t, b, one)
	for k, want := range map[string]string{"a": "1", "b": "", "c": "3"} {
		if v, _ := ssDo(t, s, "c", "GET", k); string(v.Str) != want {
			t.Errorf("after restart GET %s = %q, want %q", k, v.Str, want)
		}
	}
	s.stop()
}
