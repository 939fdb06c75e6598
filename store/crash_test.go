package store

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

const crashEnvDir = "SMARTGO_STORE_CRASH_DIR"
const crashEnvSeed = "SMARTGO_STORE_CRASH_SEED"
const crashEnvTopics = "SMARTGO_STORE_CRASH_TOPICS" // topics of 3 queues the child writes (default 3)

func crashOptions(root string) Options {
	o := testOptions(root)
	o.FlushMode = FlushSync
	o.SegmentSize = 64 << 10
	o.CQEntriesPerFile = 32
	o.IndexEntries = 300
	return o
}

func crashBody(id int64) string {
	n := int(id % 700)
	return strconv.FormatInt(id, 10) + ":" + strings.Repeat(string(rune('a'+id%26)), n)
}

// TestStoreCrashChild is the writer process of TestStoreCrashRecovery: with
// the env variable set it opens the store in sync-flush mode and puts
// messages from several goroutines, printing one line per acknowledged
// record, until it is killed.
func TestStoreCrashChild(t *testing.T) {
	root := os.Getenv(crashEnvDir)
	if root == "" {
		t.Skip("crash writer; run by TestStoreCrashRecovery")
	}
	seed, _ := strconv.ParseInt(os.Getenv(crashEnvSeed), 10, 64)
	topics, _ := strconv.Atoi(os.Getenv(crashEnvTopics))
	topics = max(topics, 3)
	s, err := Open(crashOptions(root))
	if err != nil {
		fmt.Fprintf(os.Stderr, "open: %v\n", err)
		os.Exit(3)
	}
	var outMu sync.Mutex
	out := os.Stdout
	ack := func(phy int64, m *record.Message, id int64) {
		line := fmt.Sprintf("ack %d %s %d %d %d\n", phy, m.Topic, m.QueueID, m.QueueOffset, id)
		outMu.Lock()
		_, _ = io.WriteString(out, line)
		outMu.Unlock()
	}
	outMu.Lock()
	_, _ = io.WriteString(out, "ready\n")
	outMu.Unlock()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
			for n := int64(0); ; n++ {
				id := seed*10_000_000 + int64(w)*1_000_000 + n*4
				topic := fmt.Sprintf("C%d", rng.IntN(topics))
				q := int32(rng.IntN(3))
				if n%10 == 9 {
					tmpl := newMsg(msgSpec{topic: topic, qid: q})
					var items []record.BatchItem
					for k := range int64(3) {
						items = append(items, record.BatchItem{Body: []byte(crashBody(id + k)),
							Properties: []byte("KEYS\x01id" + strconv.FormatInt(id+k, 10))})
					}
					res, err := s.PutBatch(context.Background(), tmpl, items)
					if err != nil || res.Status != PutOK {
						continue
					}
					for k := range 3 {
						m := &record.Message{Topic: topic, QueueID: q, QueueOffset: res.QueueOffset + int64(k)}
						ack(res.PhysicalOffsets[k], m, id+int64(k))
					}
					continue
				}
				m := newMsg(msgSpec{topic: topic, qid: q, body: crashBody(id), keys: "id" + strconv.FormatInt(id, 10)})
				res, err := s.Put(context.Background(), m)
				if err != nil || res.Status != PutOK {
					continue
				}
				ack(res.PhysicalOffset, m, id)
			}
		}()
	}
	wg.Wait()
}

type ackRec struct {
	phy   int64
	topic string
	qid   int32
	qoff  int64
	id    int64
}

func TestStoreCrashRecovery(t *testing.T) {
	kills := 20
	if os.Getenv("SMARTGO_LONG") != "" {
		kills = 200
	}
	if testing.Short() {
		kills = 5
	}
	crashKills(t, kills, 3)
}

// TestStoreCrashRecoveryManyQueues is TestStoreCrashRecovery with 600
// queues and 8 descriptors (testOptions): the child's files are closed
// and reopened all the time when it is killed.
func TestStoreCrashRecoveryManyQueues(t *testing.T) {
	crashKills(t, 5, 200)
}

// crashKills runs the crash child on one store kills times, killing it
// with SIGKILL after a random while, and checks after each kill that
// every put it acknowledged is recovered.
func crashKills(t *testing.T, kills, topics int) {
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	var acked []ackRec
	for iter := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStoreCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDir+"="+root, crashEnvSeed+"="+strconv.Itoa(iter+1),
			crashEnvTopics+"="+strconv.Itoa(topics))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<16)
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for the child to be ready, then let it write for a while.
		select {
		case l := <-lines:
			if l != "ready" {
				t.Fatalf("child said %q", l)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("child not ready; stderr: %s", stderr.String())
		}
		time.Sleep(time.Duration(5+rng.IntN(120)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		<-readDone
		n := 0
		for l := range lines {
			f := strings.Fields(l)
			if len(f) != 6 || f[0] != "ack" {
				continue // a line cut by the kill
			}
			phy, _ := strconv.ParseInt(f[1], 10, 64)
			qid, _ := strconv.Atoi(f[3])
			qoff, _ := strconv.ParseInt(f[4], 10, 64)
			id, _ := strconv.ParseInt(f[5], 10, 64)
			acked = append(acked, ackRec{phy, f[2], int32(qid), qoff, id})
			n++
		}
		verifyAfterCrash(t, root, acked, iter)
		t.Logf("kill %d: %d new acks, %d total", iter, n, len(acked))
	}
	if len(acked) < kills {
		t.Fatalf("only %d acknowledged puts over %d runs", len(acked), kills)
	}
}

func verifyAfterCrash(t *testing.T, root string, acked []ackRec, iter int) {
	t.Helper()
	s, err := Open(crashOptions(root))
	if err != nil {
		t.Fatalf("kill %d: reopen: %v", iter, err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}()
	rep := s.RecoveryReport()
	if !rep.Abnormal {
		t.Fatalf("kill %d: recovery not abnormal", iter)
	}
	seen := map[int64]bool{}
	for _, a := range acked {
		if seen[a.phy] {
			t.Fatalf("two acks for phy %d", a.phy)
		}
		seen[a.phy] = true
		r, err := s.MessageAt(a.phy)
		if err != nil {
			t.Fatalf("kill %d: acked %+v lost: %v (report %+v)", iter, a, err, rep)
		}
		m, _, err := record.Decode(r.Buffers[0], true)
		r.Release()
		if err != nil {
			t.Fatalf("kill %d: acked %+v damaged: %v", iter, a, err)
		}
		if m.Topic != a.topic || m.QueueID != a.qid || m.QueueOffset != a.qoff || string(m.Body) != crashBody(a.id) {
			t.Fatalf("kill %d: acked %+v reads back as %s/%d/%d %.20q", iter, a, m.Topic, m.QueueID, m.QueueOffset, m.Body)
		}
		g, err := s.GetMessages(a.topic, a.qid, a.qoff, 1, nil)
		if err != nil || g.Status != GetFound || g.PhysicalOffsets[0] != a.phy {
			st := g.Status
			g.Release()
			t.Fatalf("kill %d: acked %+v not in its consume queue: %v", iter, a, st)
		}
		g.Release()
	}
	// Whatever else survived is complete and valid: every queue entry
	// points at a CRC-valid record, and the whole log parses.
	checkConsistency(t, s)
	for _, cq := range s.allCQs() {
		for off := cq.minOff.Load(); off < cq.maxOff.Load(); {
			g, _ := s.GetMessages(cq.topic, cq.queueID, off, 32, nil)
			if g.Status != GetFound {
				t.Fatalf("kill %d: %s/%d offset %d: %v", iter, cq.topic, cq.queueID, off, g.Status)
			}
			for _, b := range g.Buffers {
				if _, err := record.Parse(b, true); err != nil {
					t.Fatalf("kill %d: torn record readable: %v", iter, err)
				}
			}
			off = g.NextBeginOffset
			g.Release()
		}
	}
	for _, m := range s.cl.list() {
		end := m.size
		if s.cl.active == m {
			end = s.cl.writePos - m.base
		}
		for rel := int64(0); rel < end; {
			size, magic, _ := record.PeekHeader(m.data[rel:])
			if magic == record.MagicBlank {
				break
			}
			if _, err := record.Parse(m.data[rel:rel+int64(size)], true); err != nil {
				t.Fatalf("kill %d: commitlog invalid at %d: %v", iter, m.base+rel, err)
			}
			rel += int64(size)
		}
	}
}
