package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

type corpusMsg struct {
	pr   PutResult
	spec msgSpec
}

// buildCorpus writes a store with several segments, queues and index files
// and closes it cleanly.
func buildCorpus(t *testing.T, root string) []corpusMsg {
	t.Helper()
	return buildCorpusN(t, root, 600)
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a live store's temp file (checkpoint) renamed meanwhile: not in the image
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, in)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xFF
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// verifyPrefix checks that every message entirely below limit is readable
// by offset and through its queue, intact.
func verifyPrefix(t *testing.T, s *Store, corpus []corpusMsg, limit int64) int {
	t.Helper()
	n := 0
	for _, c := range corpus {
		if c.pr.PhysicalOffset+int64(c.pr.WroteBytes) > limit {
			continue
		}
		m, err := s.ReadMessage(c.pr.PhysicalOffset)
		if err != nil {
			t.Fatalf("message at %d (below damage at %d) lost: %v", c.pr.PhysicalOffset, limit, err)
		}
		if string(m.Body) != c.spec.body || m.Topic != c.spec.topic {
			t.Fatalf("message at %d altered", c.pr.PhysicalOffset)
		}
		if _, _, err := record.Decode(mustRaw(t, s, c.pr.PhysicalOffset), true); err != nil {
			t.Fatalf("crc: %v", err)
		}
		g, _ := s.GetMessages(c.spec.topic, c.spec.qid, c.pr.QueueOffset, 1, nil)
		if g.Status != GetFound || g.PhysicalOffsets[0] != c.pr.PhysicalOffset {
			t.Fatalf("message %s/%d/%d not in queue: %v", c.spec.topic, c.spec.qid, c.pr.QueueOffset, g.Status)
		}
		g.Release()
		n++
	}
	return n
}

func mustRaw(t *testing.T, s *Store, phy int64) []byte {
	r, err := s.MessageAt(phy)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	return append([]byte(nil), r.Buffers[0]...)
}

func TestStoreCorruptionCommitLog(t *testing.T) {
	golden := t.TempDir()
	corpus := buildCorpus(t, golden)
	segs := segmentFiles(t, golden)
	sort.Strings(segs)
	end := corpus[len(corpus)-1].pr.PhysicalOffset + int64(corpus[len(corpus)-1].pr.WroteBytes)
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 12 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, golden, root)
			// Damage lands in the last three segments (normal recovery's window).
			first, _ := parseFileName(filepath.Base(segs[max(0, len(segs)-3)]))
			pos := first + rng.Int64N(end-first)
			base := pos - pos%(64<<10)
			path := filepath.Join(root, "commitlog", fileNameFor(base))
			truncate := trial%2 == 1
			if truncate {
				if err := os.Truncate(path, pos-base); err != nil {
					t.Fatal(err)
				}
			} else {
				flipByte(t, path, pos-base)
			}
			s := openTest(t, root, nil)
			rep := s.RecoveryReport()
			got := verifyPrefix(t, s, corpus, pos)
			// The record holding the damage is gone or intact, never torn.
			for _, c := range corpus {
				if c.pr.PhysicalOffset <= pos && pos < c.pr.PhysicalOffset+int64(c.pr.WroteBytes) {
					if m, err := s.ReadMessage(c.pr.PhysicalOffset); err == nil && string(m.Body) == c.spec.body {
						t.Logf("damage at %d hit an unchecked header field of %d", pos, c.pr.PhysicalOffset)
					} else if rep.Err() == nil {
						t.Fatalf("record at %d cut without a corruption report", c.pr.PhysicalOffset)
					}
				}
			}
			if truncate && !isCorrupt(rep.Err()) {
				t.Fatalf("truncation not reported: %+v", rep)
			}
			t.Logf("damage %v at %d: %d messages before it served; report: %v", map[bool]string{true: "truncate", false: "flip"}[truncate], pos, got, rep.Err())
			// The store keeps working after the cut.
			mustPut(t, s, msgSpec{topic: "T0", qid: 0, body: "after"})
			waitDispatched(t, s)
		})
	}
}

func TestStoreCorruptionConsumeQueue(t *testing.T) {
	golden := t.TempDir()
	corpus := buildCorpus(t, golden)
	cqFiles, _ := filepath.Glob(filepath.Join(golden, "consumequeue", "*", "*", "*"))
	sort.Strings(cqFiles)
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 12 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, golden, root)
			rel, _ := filepath.Rel(golden, cqFiles[rng.IntN(len(cqFiles))])
			path := filepath.Join(root, rel)
			size := fileSize(t, path)
			pos := rng.Int64N(size)
			if trial%2 == 1 {
				if err := os.Truncate(path, pos); err != nil {
					t.Fatal(err)
				}
			} else {
				flipByte(t, path, pos)
			}
			s := openTest(t, root, nil)
			// Re-dispatch rebuilds whatever was cut: every message is back.
			got := verifyPrefix(t, s, corpus, 1<<62)
			if got != len(corpus) {
				t.Fatalf("%d of %d messages served", got, len(corpus))
			}
			t.Logf("%s at %d: report %v, dispatch from %d", rel, pos, s.RecoveryReport().Err(), s.RecoveryReport().DispatchFrom)
		})
	}
}

func TestStoreCorruptionIndex(t *testing.T) {
	golden := t.TempDir()
	corpus := buildCorpus(t, golden)
	idxFiles, _ := filepath.Glob(filepath.Join(golden, "index", "*"))
	if len(idxFiles) < 2 {
		t.Fatalf("%d index files", len(idxFiles))
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for trial := range 12 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, golden, root)
			rel, _ := filepath.Rel(golden, idxFiles[rng.IntN(len(idxFiles))])
			path := filepath.Join(root, rel)
			size := fileSize(t, path)
			pos := rng.Int64N(size)
			if trial%3 == 0 {
				pos = rng.Int64N(indexHeaderSize)
			}
			truncate := trial%2 == 1
			if truncate {
				if err := os.Truncate(path, pos); err != nil {
					t.Fatal(err)
				}
			} else {
				for range 8 {
					flipByte(t, path, min(size-1, pos+rng.Int64N(64)))
				}
			}
			s := openTest(t, root, nil)
			waitIndexRepaired(t, s)
			rep := s.RecoveryReport()
			if truncate && (!rep.Reindexed || !isCorrupt(rep.Err())) {
				t.Fatalf("truncated index not reported/reindexed: %+v", rep)
			}
			if got := verifyPrefix(t, s, corpus, 1<<62); got != len(corpus) {
				t.Fatalf("%d of %d messages served", got, len(corpus))
			}
			found := 0
			for _, c := range corpus {
				r, err := s.QueryByKey(c.spec.topic, c.spec.keys, 4, 0, 1<<62)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range r.Buffers {
					m, _, err := record.Decode(b, true)
					if err != nil || !strings.Contains(m.Properties, c.spec.keys) {
						t.Fatalf("query %s returned a wrong record", c.spec.keys)
					}
				}
				if r.MessageCount() > 0 {
					found++
				}
				r.Release()
			}
			if found != len(corpus) {
				t.Fatalf("only %d of %d keys found", found, len(corpus))
			}
			t.Logf("%s damage at %d: %d/%d keys found; report %v", rel, pos, found, len(corpus), rep.Err())
		})
	}
}

func TestStoreCorruptionCheckpoint(t *testing.T) {
	golden := t.TempDir()
	corpus := buildCorpus(t, golden)
	for trial, crash := range []bool{false, true, false, true} {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, golden, root)
			path := filepath.Join(root, checkpointName)
			if trial < 2 {
				flipByte(t, path, int64(trial*13)%checkpointSize)
			} else if err := os.Truncate(path, 11); err != nil {
				t.Fatal(err)
			}
			if crash {
				if err := os.WriteFile(filepath.Join(root, abortName), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := openTest(t, root, nil)
			rep := s.RecoveryReport()
			if rep.CheckpointValid || !isCorrupt(rep.Err()) {
				t.Fatalf("damaged checkpoint not reported: %+v", rep)
			}
			if crash && rep.ScanFrom != 0 {
				t.Fatalf("crash with a bad checkpoint must scan from the start, scanned from %d", rep.ScanFrom)
			}
			if got := verifyPrefix(t, s, corpus, 1<<62); got != len(corpus) {
				t.Fatalf("%d of %d messages", got, len(corpus))
			}
		})
	}
}
