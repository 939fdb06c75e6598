package rocketmq

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropDiskFilledThenKill9: rocketmq-client-go producers send
// (SendSync) to a `smartgo standalone` whose data is on a 64 MiB tmpfs;
// another process fills the tmpfs to its last page under that load, the
// broker refuses sends, and it is killed with SIGKILL while the disk is
// still full. It must start again on the full disk (reading an index
// file's unwritten header through its mapping on a full tmpfs raised
// SIGBUS at load), keep every record it acknowledged even though the
// recovery cannot write their consume-queue entries yet (it used to skip
// them for good, reported as corruption), and, once the filler is
// removed, take writes again and serve every acknowledged send.
func TestInteropDiskFilledThenKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and kills a process")
	}
	disk := testutil.MountTmpfs(t, "64m")
	k := startKillableData(t, filepath.Join(disk, "data"), "store.segment_size=8MiB", "store.preallocate=1MiB")
	const topic, group = "InteropDiskFull", "interop-diskfull"
	createTopic(t, k.broker, topic, 4)
	createTopic(t, k.broker, "%RETRY%"+group, 1)
	l := startSendLoad(t, &k.standalone, topic, "before", 2)
	testutil.WaitFor(t, 30*time.Second, "300 acknowledged sends", func() bool { n, _ := l.counts(); return n >= 300 })

	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	_, e0 := l.counts()
	testutil.WaitFor(t, 30*time.Second, "sends refused on the full disk", func() bool { _, e := l.counts(); return e >= e0+20 })
	if err := k.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("smartgo gone while its disk is full: %v", err)
	}
	// Killed, and started again on the still full disk: it recovers,
	// then waits (its state store waits for the consume queues) until
	// the filler goes.
	_ = k.cmd.Process.Signal(syscall.SIGKILL)
	_ = k.cmd.Wait()
	_ = k.log.Close()
	l.end()
	freed := testutil.RemoveOnceLogged(filepath.Join(k.dir, fmt.Sprintf("smartgo-%d.log", k.runs+1)), "store: recovered", filler, 30*time.Second)
	k.start(t)
	if err := <-freed; err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "writes accepted again", func() bool { return k.logContains("disk has room again") })
	l2 := startSendLoad(t, &k.standalone, topic, "after", 1) // a new producer: the others cached a route without write permission
	testutil.WaitFor(t, 30*time.Second, "50 sends acknowledged after space freed", func() bool { n, _ := l2.counts(); return n >= 50 })
	l2.end()

	acked := map[string]bool{}
	for _, m := range []map[string]bool{l.acked, l2.acked} {
		for b := range m {
			acked[b] = true
		}
	}
	read := readBackAll(t, startPullConsumer(t, k.registry, group, topic), acked, "after the full disk, kill -9 and restart")
	t.Logf("%d acknowledged before the kill (%d refused), %d after space freed: all read back (%d distinct bodies read)",
		len(l.acked), l.errs, len(l2.acked), read)
}

// sendLoad is producers sending distinct bodies with SendSync until end,
// noting each one acknowledged with SEND_OK.
type sendLoad struct {
	mu    sync.Mutex
	acked map[string]bool // protected by mu
	errs  int             // sends not acknowledged; protected by mu
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func startSendLoad(t *testing.T, s *standalone, topic, prefix string, producers int) *sendLoad {
	t.Helper()
	l := &sendLoad{acked: map[string]bool{}}
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	t.Cleanup(l.end)
	pad := strings.Repeat("x", 2000)
	for w := range producers {
		p := newProducer(t, s, fmt.Sprintf("%s-%d", prefix, w))
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				body := fmt.Sprintf("%s-%d-%d|%s", prefix, w, n, pad)
				res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
				ok := err == nil && res.Status == primitive.SendOK
				l.mu.Lock()
				if ok {
					l.acked[body] = true
				} else {
					l.errs++
				}
				l.mu.Unlock()
				if !ok {
					time.Sleep(20 * time.Millisecond) // refused, or the broker is down
				}
			}
		}()
	}
	return l
}

// counts returns the sends acknowledged and refused so far.
func (l *sendLoad) counts() (acked, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), l.errs
}

// end stops the producers' loops and waits for them (idempotent).
func (l *sendLoad) end() { l.stop(); l.wg.Wait() }
