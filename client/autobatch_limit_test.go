package client

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
)

// A broker whose maxMessageSize is below AutoBatchMaxBytes refuses the
// larger auto-batches whole (MESSAGE_ILLEGAL: it bounds a whole batch's
// body); their messages, each within the limit, are then sent alone:
// every send succeeds, each message stored once.
func TestClientAutoBatchRefusedBatchSentAlone(t *testing.T) {
	c := startCluster(t, cluster.Options{MaxMessageSize: 16 << 10})
	createTopic(t, c, 1, "AutoBatchLimit", 1)
	p := newTestProducer(t, c, func(o *ProducerOptions) { o.AutoBatchRequests = 1 })
	ctx := testCtx(t, 30*time.Second)
	const n = 200
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		slots = map[int64]string{} // queue offset -> body
	)
	for i := 0; i < n; i++ {
		body := strconv.Itoa(i) + "-" + strings.Repeat("z", 2<<10)
		wg.Add(1)
		if err := p.SendAsync(ctx, &Message{Topic: "AutoBatchLimit", Body: []byte(body)}, func(r *SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if prev, dup := slots[r.QueueOffset]; dup {
				errs = append(errs, &BrokerError{Remark: "offset " + strconv.FormatInt(r.QueueOffset, 10) + " twice: " + prev[:4] + " " + body[:4]})
			}
			slots[r.QueueOffset] = body
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d sends failed, first: %v", len(errs), errs[0])
	}
	if p.batches.Load() == 0 {
		t.Fatal("no batch request was tried")
	}
	if len(slots) != n {
		t.Fatalf("%d messages stored, want %d", len(slots), n)
	}
	for off := range int64(n) {
		if slots[off] == "" {
			t.Fatalf("queue offset %d unused: a refused batch stored something", off)
		}
	}
}
