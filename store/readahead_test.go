package store

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

// vmaAdvice lists, for each mapping of path in /proc/self/smaps, its
// offset range in the file and whether it is advised random (VmFlags rr).
type vmaRange struct {
	from, to int64
	random   bool
}

func vmaAdvice(t *testing.T, path string) []vmaRange {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	var out []vmaRange
	cur := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			cur = -1 // a new mapping
			if len(fields) < 6 || fields[5] != path {
				continue
			}
			var lo, hi uint64
			if _, err := fmt.Sscanf(fields[0], "%x-%x", &lo, &hi); err != nil {
				t.Fatal(err)
			}
			off, err := strconv.ParseInt(fields[2], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, vmaRange{from: off, to: off + int64(hi-lo)})
			cur = len(out) - 1
			continue
		}
		if cur >= 0 && strings.HasPrefix(line, "VmFlags:") {
			out[cur].random = strings.Contains(line, " rr")
		}
	}
	return out
}

// The active segment's mapping is advised random (no readahead into
// unwritten blocks) from between one and two raStep behind the writer to
// its end; the part further behind keeps normal readahead, and a segment
// the writer left behind gets it back whole.
func TestCommitLogReadaheadEdge(t *testing.T) {
	const segSize = 4 * raStep
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.SegmentSize = segSize
		o.MaxMessageSize = 1 << 20
		o.AsyncWrites = AsyncWritePwrite
	})
	body := strings.Repeat("x", 256<<10)
	put := func(until int64) {
		for s.cl.appended.Load() < until {
			m := newMsg(msgSpec{topic: "T", body: body})
			if _, err := s.Put(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(1 << 20)
	seg := s.cl.list()[0]
	want := func(name string, ranges ...vmaRange) {
		t.Helper()
		got := vmaAdvice(t, seg.path)
		if fmt.Sprint(got) != fmt.Sprint(ranges) {
			t.Fatalf("%s: mappings of the segment %v, want %v", name, got, ranges)
		}
	}
	want("fresh segment", vmaRange{0, segSize, true})

	put(2*raStep + 1<<20) // the writer is past 2*raStep: the first raStep goes back to normal
	want("after 2*raStep", vmaRange{0, raStep, false}, vmaRange{raStep, segSize, true})

	put(segSize + 1<<20) // rolled: the old segment is normal again, the new one random
	want("after the roll", vmaRange{0, segSize, false})
	next := s.cl.list()[1]
	if got := vmaAdvice(t, next.path); len(got) != 1 || !got[0].random {
		t.Fatalf("new active segment: %v", got)
	}
}

// Puts written through the mapping keep normal readahead (the prefaulter
// fills the page cache ahead of them); in the hybrid mode the advice
// follows the write path: random while batches go out with pwrite, normal
// again once single puts go through the mapping.
func TestCommitLogReadaheadFollowsWritePath(t *testing.T) {
	const segSize = 4 * raStep
	now := time.UnixMilli(1_700_000_000_000)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.SegmentSize = segSize
		o.AsyncWrites = AsyncWriteHybrid
		o.Now = clock
	})
	random := func() bool {
		t.Helper()
		got := vmaAdvice(t, s.cl.list()[0].path)
		for _, r := range got {
			if r.random {
				return true
			}
		}
		return false
	}
	mustPut(t, s, msgSpec{topic: "T", body: "single"})
	if random() {
		t.Fatal("random advice after a put through the mapping")
	}
	tmpl := newMsg(msgSpec{topic: "T"})
	if _, err := s.PutBatch(t.Context(), tmpl, []record.BatchItem{{Body: []byte("a")}, {Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	if !random() {
		t.Fatal("no random advice after a batch written with pwrite")
	}
	mu.Lock()
	now = now.Add(2 * hybridWindow)
	mu.Unlock()
	mustPut(t, s, msgSpec{topic: "T", body: "single again"})
	if random() {
		t.Fatal("random advice kept after single puts went back to the mapping")
	}
}
