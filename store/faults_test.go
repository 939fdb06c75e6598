package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/vfs"
)

// The store's documented behaviour for each failure of the file layer
// (doc.go, "Failures"), injected with vfs.Faulty at chosen points.

func faultStore(t *testing.T, root string, mutate func(*Options)) (*Store, *vfs.Faulty) {
	t.Helper()
	fs := vfs.NewFaulty(nil)
	s := openTest(t, root, func(o *Options) {
		o.FS = fs
		if mutate != nil {
			mutate(o)
		}
	})
	return s, fs
}

func putTopic(t *testing.T, s *Store, topic string, n int) []PutResult {
	t.Helper()
	var out []PutResult
	for i := range n {
		out = append(out, mustPut(t, s, msgSpec{topic: topic, body: fmt.Sprint(topic, i)}))
	}
	return out
}

// readable checks that every result is readable by offset with its body.
func readable(t *testing.T, s *Store, topic string, prs []PutResult) {
	t.Helper()
	for i, pr := range prs {
		m, err := s.ReadMessage(pr.PhysicalOffset)
		if err != nil || string(m.Body) != fmt.Sprint(topic, i) {
			t.Fatalf("acknowledged %s%d lost: %v", topic, i, err)
		}
	}
}

func reopenAfter(t *testing.T, s *Store, root string) *Store {
	t.Helper()
	_ = s.Close()
	return openTest(t, root, nil)
}

// fsync of the commitlog fails: the store fails stop. Puts waiting for
// that sync are not acknowledged as durable, later puts are refused with
// ErrWriteFailed, reads go on, Close keeps the abort file, and the next
// start recovers every acknowledged message.
func TestStoreFaultCommitLogSync(t *testing.T) {
	root := t.TempDir()
	s, fs := faultStore(t, root, func(o *Options) { o.FlushMode = FlushSync })
	before := putTopic(t, s, "A", 20)
	fs.Inject(vfs.Rule{Op: vfs.OpSync, Path: "commitlog", Err: syscall.EIO})
	res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "A", body: "during"}))
	if err == nil && res.Status == PutOK {
		t.Fatal("a put whose sync failed was acknowledged as durable")
	}
	if !errors.Is(s.Err(), ErrWriteFailed) || !errors.Is(s.Err(), syscall.EIO) {
		t.Fatalf("sticky error %v", s.Err())
	}
	if _, err := s.Put(context.Background(), newMsg(msgSpec{topic: "A", body: "after"})); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("put after a failed sync: %v", err)
	}
	readable(t, s, "A", before)
	_ = s.Close()
	if _, err := os.Stat(filepath.Join(root, abortName)); err != nil {
		t.Fatal("Close after a failed sync removed the abort file")
	}
	fs.Clear()
	s = openTest(t, root, nil)
	if !s.RecoveryReport().Abnormal {
		t.Fatal("next start did not recover as after a crash")
	}
	readable(t, s, "A", before)
}

// A write of the commitlog fails with EIO: the put fails and the store
// fails stop (nothing after it is ever acknowledged). With ENOSPC instead,
// only that put fails: no sticky error, and puts succeed again once the
// disk has room.
func TestStoreFaultCommitLogWrite(t *testing.T) {
	for _, mode := range []FlushMode{FlushAsync, FlushSync} {
		t.Run("EIO/"+mode.String(), func(t *testing.T) {
			s, fs := faultStore(t, t.TempDir(), func(o *Options) { o.FlushMode = mode; o.AsyncWrites = AsyncWritePwrite })
			before := putTopic(t, s, "A", 10)
			fs.Inject(vfs.Rule{Op: vfs.OpWrite, Path: "commitlog", Count: 1, Err: syscall.EIO})
			if res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "A", body: "x"})); err == nil && res.Status == PutOK {
				t.Fatal("put acknowledged although its write failed")
			}
			if !errors.Is(s.Err(), ErrWriteFailed) {
				t.Fatalf("EIO not sticky: %v", s.Err())
			}
			readable(t, s, "A", before)
		})
		t.Run("ENOSPC/"+mode.String(), func(t *testing.T) {
			s, fs := faultStore(t, t.TempDir(), func(o *Options) { o.FlushMode = mode; o.AsyncWrites = AsyncWritePwrite })
			before := putTopic(t, s, "A", 10)
			fs.Inject(vfs.Rule{Op: vfs.OpWrite, Path: "commitlog", Count: 1, Err: syscall.ENOSPC})
			_, err := s.Put(context.Background(), newMsg(msgSpec{topic: "A", body: "refused"}))
			if !errors.Is(err, ErrDiskFull) {
				t.Fatalf("put meeting ENOSPC: %v, want ErrDiskFull", err)
			}
			if s.Err() != nil {
				t.Fatalf("ENOSPC made the store fail: %v", s.Err())
			}
			// The real disk has room: the watcher lets writes in again.
			testutil.Eventually(t, 5*time.Second, func() error {
				_, err := s.Put(context.Background(), newMsg(msgSpec{topic: "B", body: "again"}))
				return err
			})
			readable(t, s, "A", before)
			more := mustPut(t, s, msgSpec{topic: "A", body: "A10"})
			if more.QueueOffset != 10 {
				t.Fatalf("queue offset after a refused put: %d, want 10 (the refused one's is reused)", more.QueueOffset)
			}
			waitDispatched(t, s)
			if got := readAll(t, s, "A", 0); len(got) != 11 {
				t.Fatalf("queue A/0 holds %d messages, want 11", len(got))
			}
		})
	}
}

// Allocating blocks ahead of the writer fails: with ENOSPC the put that
// needed them fails with ErrDiskFull, with EIO it fails as not stored; in
// both cases nothing was written, the store does not fail, and the next
// put (once the allocation works) succeeds.
func TestStoreFaultAllocate(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
		t.Run(e.Error(), func(t *testing.T) {
			s, fs := faultStore(t, t.TempDir(), func(o *Options) {
				o.SegmentSize = 1 << 20
				o.Preallocate = 16 << 10
				o.WarmSegments = false
			})
			remove := fs.Inject(vfs.Rule{Op: vfs.OpAllocate, Path: "commitlog", Err: e})
			var refused error
			var before []PutResult
			for i := 0; refused == nil && i < 1000; i++ {
				res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "A", body: fmt.Sprintf("A%d", i)}))
				if err != nil {
					refused = err
					break
				}
				before = append(before, res)
			}
			if refused == nil {
				t.Fatal("no put needed an allocation")
			}
			if e == syscall.ENOSPC && !errors.Is(refused, ErrDiskFull) {
				t.Fatalf("ENOSPC allocation: %v", refused)
			}
			if s.Err() != nil {
				t.Fatalf("a failed allocation failed the store: %v", s.Err())
			}
			remove()
			testutil.Eventually(t, 5*time.Second, func() error {
				_, err := s.Put(context.Background(), newMsg(msgSpec{topic: "B", body: "again"}))
				return err
			})
			readable(t, s, "A", before)
			if fs.Failed(vfs.OpAllocate) == 0 {
				t.Fatal("the rule never fired")
			}
		})
	}
}

// A consume-queue sync (the logic flush) fails: writes go on, the
// checkpoint does not move until a flush succeeds again, and a clean
// Close after that leaves no abort file.
func TestStoreFaultConsumeQueueSync(t *testing.T) {
	root := t.TempDir()
	s, fs := faultStore(t, root, nil)
	putTopic(t, s, "A", 5)
	testutil.Eventually(t, 5*time.Second, func() error {
		if s.lastCheckpoint().Logics == 0 {
			return errors.New("no checkpoint yet")
		}
		return nil
	})
	remove := fs.Inject(vfs.Rule{Op: vfs.OpSync, Path: "consumequeue", Err: syscall.EIO})
	cp := s.lastCheckpoint()
	time.Sleep(10 * time.Millisecond) // a later store timestamp
	more := putTopic(t, s, "B", 5)
	testutil.Eventually(t, 5*time.Second, func() error {
		if fs.Failed(vfs.OpSync) < 2 {
			return errors.New("logic flush not tried yet")
		}
		return nil
	})
	if got := s.lastCheckpoint(); got.Logics != cp.Logics {
		t.Fatalf("checkpoint moved over a failed consume-queue sync: %d -> %d", cp.Logics, got.Logics)
	}
	if s.Err() != nil {
		t.Fatalf("a failed consume-queue sync failed the store: %v", s.Err())
	}
	readable(t, s, "B", more)
	remove()
	testutil.Eventually(t, 5*time.Second, func() error {
		if s.lastCheckpoint().Logics == cp.Logics {
			return errors.New("checkpoint not moving")
		}
		return nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, abortName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("abort file left after a clean close")
	}
}

// A consume queue cannot grow (ENOSPC allocating its file): the message is
// stored, the dispatcher waits instead of failing, and the entry appears
// once the allocation works.
func TestStoreFaultConsumeQueueAllocate(t *testing.T) {
	s, fs := faultStore(t, t.TempDir(), nil)
	remove := fs.Inject(vfs.Rule{Op: vfs.OpAllocate, Path: filepath.Join("consumequeue", "Q"), Err: syscall.ENOSPC})
	pr := mustPut(t, s, msgSpec{topic: "Q", body: "Q0"})
	testutil.Eventually(t, 5*time.Second, func() error {
		if fs.Failed(vfs.OpAllocate) == 0 {
			return errors.New("dispatcher has not tried yet")
		}
		return nil
	})
	if s.MaxOffset("Q", 0) != 0 {
		t.Fatal("an entry appeared although its file could not be allocated")
	}
	if s.Err() != nil {
		t.Fatalf("dispatcher failure failed the store: %v", s.Err())
	}
	readable(t, s, "Q", []PutResult{pr})
	remove()
	testutil.Eventually(t, 5*time.Second, func() error {
		if s.MaxOffset("Q", 0) != 1 {
			return errors.New("entry not dispatched yet")
		}
		return nil
	})
}

// Close whose last consume-queue flush fails keeps the abort file; the
// next start recovers as after a crash and loses nothing acknowledged.
func TestStoreFaultCloseKeepsAbort(t *testing.T) {
	root := t.TempDir()
	s, fs := faultStore(t, root, nil)
	prs := putTopic(t, s, "A", 20)
	fs.Inject(vfs.Rule{Op: vfs.OpSync, Path: "consumequeue", Err: syscall.EIO})
	if err := s.Close(); err == nil {
		t.Fatal("Close hid a failed flush")
	}
	if _, err := os.Stat(filepath.Join(root, abortName)); err != nil {
		t.Fatal("abort file removed after a failed final flush")
	}
	s = reopenAfter(t, s, root)
	if !s.RecoveryReport().Abnormal {
		t.Fatal("not recovered as after a crash")
	}
	readable(t, s, "A", prs)
}

// msync of mapped writes fails (FlushAsync through the mapping): fail stop,
// as for fdatasync.
func TestStoreFaultMsync(t *testing.T) {
	s, fs := faultStore(t, t.TempDir(), func(o *Options) { o.AsyncWrites = AsyncWriteMapped })
	prs := putTopic(t, s, "A", 5)
	fs.Inject(vfs.Rule{Op: vfs.OpMsync, Path: "commitlog", Err: syscall.EIO})
	putTopic(t, s, "B", 1)
	testutil.Eventually(t, 5*time.Second, func() error {
		if !errors.Is(s.Err(), ErrWriteFailed) {
			return fmt.Errorf("not failed yet: %v", s.Err())
		}
		return nil
	})
	readable(t, s, "A", prs)
}
