package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

// The damage matrix: each case damages a copy of a cleanly closed store
// (ten 64 KiB segments, 2,000 acknowledged records in six queues), opens
// it after a clean shutdown or after a crash (abort file present), and
// asserts exactly which acknowledged records stay readable: every record
// the damage touched is gone (never served), every other one is readable
// by offset and through its queue, no queue appears that was not there,
// and the store keeps taking writes. The matrix is logged (go test -v -run
// TestStoreDamageMatrix) for the closing note.

const damageCorpusSize = 2000

// buildCorpusN writes n records over six queues with bodies of varied
// size and closes the store cleanly.
func buildCorpusN(t testing.TB, root string, n int) []corpusMsg {
	t.Helper()
	s, err := Open(testOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusMsg
	for i := range n {
		sp := msgSpec{topic: fmt.Sprintf("T%d", i%2), qid: int32(i % 3), body: fmt.Sprintf("%d:%s", i, strings.Repeat("z", i%300)),
			tags: fmt.Sprint("tag", i%4), keys: fmt.Sprint("key", i), uniq: fmt.Sprintf("U%05d", i)}
		out = append(out, corpusMsg{mustPut(t, s, sp), sp})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// damage is one way of damaging a store copy; it returns the commitlog
// ranges it destroyed.
type damage func(t *testing.T, root string, c []corpusMsg, rng *rand.Rand) [][2]int64

const segSz = 64 << 10 // testOptions' segment size

func segPath(root string, base int64) string {
	return filepath.Join(root, "commitlog", fileNameFor(base))
}

// recordsIn returns the segment bases of the corpus, oldest first.
func corpusSegments(c []corpusMsg) []int64 {
	var out []int64
	for _, m := range c {
		b := m.pr.PhysicalOffset - m.pr.PhysicalOffset%segSz
		if len(out) == 0 || out[len(out)-1] != b {
			out = append(out, b)
		}
	}
	return out
}

// flipIn flips one random bit of a random record among picks, in its
// header (the fixed fields before BODY) or in its body.
func flipIn(picks []corpusMsg, header bool) damage {
	return func(t *testing.T, root string, _ []corpusMsg, rng *rand.Rand) [][2]int64 {
		m := picks[rng.IntN(len(picks))]
		var off int64
		if header {
			off = rng.Int64N(84) // TOTALSIZE .. BODYLEN with IPv4 hosts
		} else {
			off = 88 + rng.Int64N(int64(len(m.spec.body)))
		}
		phy := m.pr.PhysicalOffset + off
		base := phy - phy%segSz
		path := segPath(root, base)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, phy-base); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 1 << rng.IntN(8)
		if _, err := f.WriteAt(b, phy-base); err != nil {
			t.Fatal(err)
		}
		return [][2]int64{{phy, phy + 1}}
	}
}

func middleSegment(c []corpusMsg) int64 {
	segs := corpusSegments(c)
	return segs[len(segs)/2]
}

var damageCases = []struct {
	name string
	make func(c []corpusMsg) damage
}{
	{"middle segment truncated to zero bytes", func(c []corpusMsg) damage {
		return func(t *testing.T, root string, _ []corpusMsg, _ *rand.Rand) [][2]int64 {
			base := middleSegment(c)
			if err := os.Truncate(segPath(root, base), 0); err != nil {
				t.Fatal(err)
			}
			return [][2]int64{{base, base + segSz}}
		}
	}},
	{"middle segment truncated half way", func(c []corpusMsg) damage {
		return func(t *testing.T, root string, _ []corpusMsg, _ *rand.Rand) [][2]int64 {
			base := middleSegment(c)
			if err := os.Truncate(segPath(root, base), segSz/2); err != nil {
				t.Fatal(err)
			}
			return [][2]int64{{base + segSz/2, base + segSz}}
		}
	}},
	{"middle segment zeroed", func(c []corpusMsg) damage {
		return func(t *testing.T, root string, _ []corpusMsg, _ *rand.Rand) [][2]int64 {
			base := middleSegment(c)
			if err := os.WriteFile(segPath(root, base), make([]byte, segSz), 0o644); err != nil {
				t.Fatal(err)
			}
			return [][2]int64{{base, base + segSz}}
		}
	}},
	{"middle segment missing", func(c []corpusMsg) damage {
		return func(t *testing.T, root string, _ []corpusMsg, _ *rand.Rand) [][2]int64 {
			base := middleSegment(c)
			if err := os.Remove(segPath(root, base)); err != nil {
				t.Fatal(err)
			}
			return [][2]int64{{base, base + segSz}}
		}
	}},
	{"4 KiB page zeroed in an old segment", func(c []corpusMsg) damage {
		return func(t *testing.T, root string, _ []corpusMsg, rng *rand.Rand) [][2]int64 {
			base := corpusSegments(c)[1]
			page := base + 4096*rng.Int64N(segSz/4096-1)
			writeFileAt(t, segPath(root, base), page-base, make([]byte, 4096))
			return [][2]int64{{page, page + 4096}}
		}
	}},
	{"bit flip in an old record's header", func(c []corpusMsg) damage { return flipIn(oldRecords(c), true) }},
	{"bit flip in an old record's body", func(c []corpusMsg) damage { return flipIn(oldRecords(c), false) }},
	{"bit flip in a new record's header", func(c []corpusMsg) damage { return flipIn(newRecords(c), true) }},
	{"bit flip in a new record's body", func(c []corpusMsg) damage { return flipIn(newRecords(c), false) }},
	{"bit flips in 5 records across the log", func(c []corpusMsg) damage {
		return func(t *testing.T, root string, all []corpusMsg, rng *rand.Rand) [][2]int64 {
			var out [][2]int64
			for i := range 5 {
				out = append(out, flipIn(all, i%2 == 0)(t, root, all, rng)...)
			}
			return out
		}
	}},
	{"torn tail: last segment cut inside its last record", func(c []corpusMsg) damage {
		return func(t *testing.T, root string, _ []corpusMsg, _ *rand.Rand) [][2]int64 {
			last := c[len(c)-1].pr
			base := last.PhysicalOffset - last.PhysicalOffset%segSz
			cut := last.PhysicalOffset + int64(last.WroteBytes)/2
			if err := os.Truncate(segPath(root, base), cut-base); err != nil {
				t.Fatal(err)
			}
			return [][2]int64{{cut, base + segSz}}
		}
	}},
}

func oldRecords(c []corpusMsg) []corpusMsg {
	first := corpusSegments(c)[1] // not the first: a flip there is no different
	var out []corpusMsg
	for _, m := range c {
		if m.pr.PhysicalOffset >= first && m.pr.PhysicalOffset+int64(m.pr.WroteBytes) <= first+segSz {
			out = append(out, m)
		}
	}
	return out
}

func newRecords(c []corpusMsg) []corpusMsg {
	segs := corpusSegments(c)
	last := segs[len(segs)-1]
	var out []corpusMsg
	for _, m := range c {
		if m.pr.PhysicalOffset >= last {
			out = append(out, m)
		}
	}
	return out[:len(out)-1] // not the very last: see the torn-tail case
}

// lostTo returns the records whose bytes intersect a destroyed range.
func lostTo(c []corpusMsg, ranges [][2]int64) map[int64]bool {
	lost := map[int64]bool{}
	for _, m := range c {
		from, to := m.pr.PhysicalOffset, m.pr.PhysicalOffset+int64(m.pr.WroteBytes)
		for _, r := range ranges {
			if from < r[1] && r[0] < to {
				lost[from] = true
			}
		}
	}
	return lost
}

// verifyExactly checks that exactly the records not in lost are readable,
// by offset and through their queue, and that no queue appeared.
func verifyExactly(t *testing.T, s *Store, c []corpusMsg, lost map[int64]bool) (kept int) {
	t.Helper()
	for _, m := range c {
		phy := m.pr.PhysicalOffset
		got, err := s.ReadMessage(phy)
		g, gerr := s.GetMessages(m.spec.topic, m.spec.qid, m.pr.QueueOffset, 1, nil)
		if gerr != nil {
			t.Fatal(gerr)
		}
		var pulled []int64
		var pulledBodies []string
		for _, b := range g.Buffers {
			v, err := record.Parse(b, true)
			if err != nil {
				t.Fatalf("pull served a record that fails verification: %v", err)
			}
			pulledBodies = append(pulledBodies, string(v.Body))
		}
		pulled = append(pulled, g.PhysicalOffsets...)
		g.Release()
		if lost[phy] {
			// A record written after recovery may take a cut record's
			// offset (torn tail): what is served must not be the lost one.
			if err == nil && string(got.Body) == m.spec.body {
				t.Fatalf("damaged record at %d served by offset", phy)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) {
				t.Fatalf("damaged record at %d: %v", phy, err)
			}
			if slices.Contains(pulledBodies, m.spec.body) {
				t.Fatalf("damaged record at %d served by its queue", phy)
			}
			continue
		}
		if err != nil {
			t.Fatalf("intact record at %d (%s/%d@%d) lost: %v", phy, m.spec.topic, m.spec.qid, m.pr.QueueOffset, err)
		}
		if string(got.Body) != m.spec.body || got.Topic != m.spec.topic || got.QueueID != m.spec.qid || got.QueueOffset != m.pr.QueueOffset {
			t.Fatalf("record at %d altered", phy)
		}
		if len(pulled) == 0 || pulled[0] != phy {
			t.Fatalf("intact record at %d not served by its queue %s/%d@%d: %v", phy, m.spec.topic, m.spec.qid, m.pr.QueueOffset, pulled)
		}
		kept++
	}
	if tp := s.Topics(); fmt.Sprint(tp) != "[T0 T1]" {
		t.Fatalf("topics after recovery %v: a damaged record made a phantom topic", tp)
	}
	for _, tp := range []string{"T0", "T1"} {
		if q := s.QueueIDs(tp); fmt.Sprint(q) != "[0 1 2]" {
			t.Fatalf("queues of %s after recovery %v: a damaged record made a phantom queue", tp, q)
		}
	}
	return kept
}

func TestStoreDamageMatrix(t *testing.T) {
	golden := t.TempDir()
	corpus := buildCorpusN(t, golden, damageCorpusSize)
	var rows []string
	var mu sync.Mutex
	for ci, dc := range damageCases {
		for _, crashed := range []bool{false, true} {
			name := fmt.Sprintf("%s/crashed=%v", dc.name, crashed)
			t.Run(name, func(t *testing.T) {
				root := t.TempDir()
				copyTree(t, golden, root)
				rng := rand.New(rand.NewPCG(uint64(ci), 77))
				ranges := dc.make(corpus)(t, root, corpus, rng)
				if crashed {
					if err := os.WriteFile(filepath.Join(root, abortName), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				lost := lostTo(corpus, ranges)
				s := openTest(t, root, nil)
				rep := s.RecoveryReport()
				kept := verifyExactly(t, s, corpus, lost)
				if kept+len(lost) != len(corpus) {
					t.Fatalf("kept %d + lost %d != %d", kept, len(lost), len(corpus))
				}
				if len(lost) > 0 && crashed && rep.Err() == nil {
					t.Fatal("damage found after a crash but not reported")
				}
				// The store keeps working, and a clean restart changes nothing.
				pr := mustPut(t, s, msgSpec{topic: "T0", qid: 0, body: "after"})
				waitIndexed(t, s)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openTest(t, root, nil)
				if kept2 := verifyExactly(t, s, corpus, lost); kept2 != kept {
					t.Fatalf("after a clean restart %d kept, before %d", kept2, kept)
				}
				if m, err := s.ReadMessage(pr.PhysicalOffset); err != nil || string(m.Body) != "after" {
					t.Fatalf("write after recovery lost: %v", err)
				}
				mu.Lock()
				rows = append(rows, fmt.Sprintf("| %s | %v | %d | %d | %d skipped range(s) |", dc.name, crashed, kept, len(lost), len(rep.Skipped)))
				mu.Unlock()
			})
		}
	}
	sort.Strings(rows)
	t.Logf("damage matrix (%d acknowledged records):\n| case | crashed | kept | lost | report |\n|---|---|---|---|---|\n%s",
		len(corpus), strings.Join(rows, "\n"))
}
