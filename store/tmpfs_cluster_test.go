//go:build cluster && linux

package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The disk-full test on a real small file system (a 48 MiB tmpfs; needs
// root to mount, skipped otherwise): a producer at full speed is refused
// before the file system runs out, nothing acknowledged is lost, and
// writes resume by themselves when a file someone else wrote is removed.
func TestStoreDiskFullRealTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; TestStoreDiskFullProducerAtFullSpeed covers this on a simulated disk")
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=48m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, filepath.Join(mnt, "store"), func(o *Options) {
		o.DiskUsage = nil // the real statfs
		o.SegmentSize = 4 << 20
		o.Preallocate = 512 << 10
		o.MaxMessageSize = 64 << 10
		o.CQEntriesPerFile = 4096
	})
	p, stop := fillUntilRefused(t, s, nil)
	took := freeAndResume(t, s, p, stop, func() {
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d refusals, writes resumed %v after space freed", p.refused.Load(), took.Round(time.Millisecond))
}
