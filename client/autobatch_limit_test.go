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
// body); the producer learns the limit its refusal names, once, and
// sends that batch's messages, and every later batch, in batches within
// it: every send succeeds, each message stored once, one refusal in all
// (each batch over the limit was refused, and its messages then sent a
// request each).
func TestClientAutoBatchLearnsBrokerLimit(t *testing.T) {
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
	// One request in flight at a time: the first batch over the limit is
	// the only one refused.
	if r, l := p.batchRefused.Load(), p.batchLimit.Load(); r != 1 || l != 16<<10 {
		t.Fatalf("%d batches refused, limit learnt %d; want 1 and %d", r, l, 16<<10)
	}
	if b := p.batches.Load(); b < n/8 || b > n/2 {
		t.Fatalf("%d batch requests for %d messages of 2 KiB under a 16 KiB limit: want batches of about 7", b, n)
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

// The body limit a MESSAGE_ILLEGAL remark names (RocketMQ's text, which
// SmartGo's broker answers too); none from other remarks.
func TestClientRemarkBodyLimit(t *testing.T) {
	for _, c := range []struct {
		remark string
		want   int64
		ok     bool
	}{
		{"the message is illegal, maybe msg body or properties length not matched. msg body length limit 4194304B, msg properties length limit 32KB.", 4194304, true},
		{"the message is illegal, maybe msg body or properties length not matched. msg body length limit 16384B, msg properties length limit 32KB. (batch body of 20000 bytes)", 16384, true},
		{"batch messages cannot have a delay level", 0, false},
		{"msg body length limit B", 0, false},
		{"msg body length limit -5B", 0, false},
		{"msg body length limit 99999999999999999999B", 0, false},
	} {
		if got, ok := remarkBodyLimit(c.remark); got != c.want || ok != c.ok {
			t.Errorf("remarkBodyLimit(%q) = %d %v, want %d %v", c.remark, got, ok, c.want, c.ok)
		}
	}
}
