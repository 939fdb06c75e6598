package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dropCaches makes every page of an open store cold: it drops the store's
// own page-table entries for each mapped file (madvise DONTNEED: the page
// cache keeps the data), syncs the file and asks the kernel to evict its
// cached pages (fadvise DONTNEED evicts only pages no process maps). It
// returns the fraction of the files' pages still resident afterwards, from
// mincore on the mappings, so a benchmark can show it really read cold.
func dropCaches(b *testing.B, s *Store) float64 {
	b.Helper()
	files := append([]*mappedFile(nil), s.cl.list()...)
	s.cqMu.Lock()
	for _, qs := range s.cqs {
		for _, cq := range qs {
			files = append(files, cq.list()...)
		}
	}
	s.cqMu.Unlock()
	var pages, resident int
	for _, m := range files {
		if err := unix.Madvise(m.data, unix.MADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
		f, err := m.pin()
		if err != nil {
			b.Fatal(err)
		}
		fd := int(f.Fd())
		if err := fdatasync(fd); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
		m.unpin()
		vec := make([]byte, (len(m.data)+4095)/4096)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m.data[0])),
			uintptr(len(m.data)), uintptr(unsafe.Pointer(&vec[0])))
		if errno != 0 {
			b.Fatal(errno)
		}
		for _, v := range vec {
			pages++
			resident += int(v & 1)
		}
	}
	return float64(resident) / float64(max(1, pages))
}

// evictFile asks the kernel to drop f's cached pages.
func evictFile(b *testing.B, f *os.File) {
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// evictTree drops the cached pages of every file under dir (after syncing
// them), so the next open reads from the disk.
func evictTree(b *testing.B, dir string) {
	b.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := fdatasync(int(f.Fd())); err != nil {
			return err
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStoreRecover1GiB is the recovery time of a 1 GiB commitlog
// (1 KiB records, 64 MiB segments), page cache cold, in one run: after a
// clean shutdown (the last RecoverSegments segments checked), after a
// crash with the whole-log check (VerifyAllOnCrash: every record's CRC,
// every segment), and after a crash without it (from the checkpoint on).
// It reports ms per Open and MiB checked; -benchtime=1x is enough.
func BenchmarkStoreRecover1GiB(b *testing.B) {
	root := b.TempDir()
	o := benchOptions(root)
	o.SegmentSize = 64 << 20
	o.IndexSlots, o.IndexEntries = 1<<20, 4<<20
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	m := benchMsg(1024)
	ctx := context.Background()
	for s.MaxPhysicalOffset() < 1<<30 {
		if _, err := s.Put(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		crash, full bool
	}{{"clean", false, false}, {"crash/verify-all", true, true}, {"crash/from-checkpoint", true, false}} {
		b.Run(c.name, func(b *testing.B) {
			var scanned int64
			var took time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if c.crash {
					if err := os.WriteFile(filepath.Join(root, abortName), nil, 0o644); err != nil {
						b.Fatal(err)
					}
				}
				evictTree(b, root)
				oo := o
				oo.VerifyAllOnCrash = c.full
				b.StartTimer()
				start := time.Now()
				s, err := Open(oo)
				if err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
				b.StopTimer()
				rep := s.RecoveryReport()
				scanned += rep.ScanBytes
				b.Logf("%s: checkpoint %+v valid %v, scan from %d, dispatch from %d, redispatched %d, took %v (check %v)",
					c.name, rep.Checkpoint, rep.CheckpointValid, rep.ScanFrom, rep.DispatchFrom, rep.Redispatched, rep.Duration, rep.ScanDuration)
				if len(rep.Skipped) > 0 || rep.CommitLogEnd < 1<<30 {
					b.Fatalf("recovery of an intact log: %+v", rep)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/open")
			b.ReportMetric(float64(scanned)/float64(b.N)/(1<<20), "MiB-checked")
		})
	}
}

// processCPU is the CPU time this process has used (user and system, every
// thread). On a shared machine a benchmark's wall time includes the time
// other processes held the cores; its CPU time does not.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
