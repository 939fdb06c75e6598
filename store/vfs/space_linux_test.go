package vfs

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The file system here, against its own numbers as df reads them.
func TestVFSSpaceUsedMatchesStatfs(t *testing.T) {
	var st unix.Statfs_t
	dir := t.TempDir()
	if err := unix.Statfs(dir, &st); err != nil {
		t.Skip(err)
	}
	sp, err := Default.Statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	used := float64(st.Blocks - st.Bfree)
	want := used / (used + float64(st.Bavail))
	if got := sp.Used(); got < want-0.01 || got > want+0.01 {
		t.Fatalf("used %.4f, df's Use%% %.4f (%+v)", got, want, st)
	}
}
