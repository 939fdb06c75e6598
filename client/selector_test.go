package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

func TestClientSQL92Subscription(t *testing.T) {
	c := startCluster(t, cluster.Options{Brokers: 2})
	createTopic(t, c, 2, "SqlT", 2)
	p := newTestProducer(t, c, nil)
	ctx := testCtx(t, 60*time.Second)
	for i := 0; i < 60; i++ {
		region := []string{"eu", "us", "ap"}[i%3]
		m := &Message{Topic: "SqlT", Body: []byte("m" + strconv.Itoa(i)), Tags: "T" + strconv.Itoa(i%2),
			Properties: map[string]string{"n": strconv.Itoa(i), "region": region}}
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for i := 0; i < 60; i++ {
		if i >= 30 && i%3 != 2 && i%2 == 0 {
			want["m"+strconv.Itoa(i)] = true
		}
	}
	col := newCollector()
	o := ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "cg-sql", From: ConsumeFromFirst,
		PullSuspend: 2 * time.Second}
	pc, err := NewPushConsumer(o, col.handler)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	if err := pc.SubscribeSQL("SqlT", "n >= 30 AND region IN ('eu', 'us') AND TAGS = 'T0'"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := col.total(); n < len(want) {
			return fmt.Errorf("%d of %d messages", n, len(want))
		}
		return nil
	})
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, m := range col.order {
		if !want[string(m.Body)] {
			t.Errorf("received %s (n=%s region=%s tag=%s), which does not match", m.Body, m.Property("n"), m.Property("region"), m.Tags)
		}
	}
	if len(col.seen) != len(want) {
		t.Errorf("received %d distinct messages, want %d", len(col.seen), len(want))
	}
}

// A malformed selector fails Start with ErrBadSubscription and the
// broker's explanation; a well-formed one on the same group is fine.
func TestClientSQL92BadSelector(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "SqlBad", 1)
	o := ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "cg-bad"}
	pc, err := NewPushConsumer(o, func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.SubscribeSQL("SqlBad", "a > 'text'"); err != nil {
		t.Fatal(err)
	}
	err = pc.Start(testCtx(t, 10*time.Second))
	if !errors.Is(err, ErrBadSubscription) || !strings.Contains(err.Error(), "cannot be compared") {
		t.Fatalf("Start with a bad selector: %v", err)
	}
	if err := pc.SubscribeSQL("SqlBad", ""); !errors.Is(err, ErrBadSubscription) {
		t.Fatalf("empty selector: %v", err)
	}

	pull, err := NewPullConsumer(PullConsumerOptions{ConsumerOptions: ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "cg-bad2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	if err := pull.SubscribeSQL("SqlBad", "a BETWEEN 9 AND 1"); err != nil {
		t.Fatal(err)
	}
	if err := pull.Start(testCtx(t, 10*time.Second)); !errors.Is(err, ErrBadSubscription) {
		t.Fatalf("pull consumer Start with a bad selector: %v", err)
	}
}
