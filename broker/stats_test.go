package broker

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestBrokerStatsWindows(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	s := NewStats(clk.now)
	// 70 minutes of 100 messages (and 10 KB) every 10 s.
	for i := 0; i < 420; i++ {
		s.AddPut("T", 100, 10_000)
		clk.advance(10 * time.Second)
		s.Sample()
	}
	snap, ok := s.Get(TopicPutNums, "T")
	if !ok || snap.Total != 42_000 {
		t.Fatalf("total = %+v %v", snap, ok)
	}
	want := map[time.Duration]int64{time.Minute: 600, 10 * time.Minute: 6000, time.Hour: 36000}
	for _, w := range snap.Windows {
		if w.Sum != want[w.Window] {
			t.Errorf("window %v: sum %d, want %d", w.Window, w.Sum, want[w.Window])
		}
		if w.TPS < 9.99 || w.TPS > 10.01 {
			t.Errorf("window %v: tps %.3f, want 10", w.Window, w.TPS)
		}
	}
	// Quiet for 2 minutes: the 1-minute window drops to zero, longer ones keep the past.
	clk.advance(2 * time.Minute)
	s.Sample()
	snap, _ = s.Get(TopicPutNums, "T")
	if snap.Windows[0].Sum != 0 || snap.Windows[1].Sum != 4800 {
		t.Fatalf("after a quiet 2 minutes: %+v", snap.Windows)
	}
	if s.Totals(TopicPutSize) != 4_200_000 {
		t.Fatalf("size total %d", s.Totals(TopicPutSize))
	}
}

func TestBrokerStatsYoungItem(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	s := NewStats(clk.now)
	s.AddGet("cg", "T", 30, 300)
	clk.advance(30 * time.Second)
	snap, ok := s.Get(GroupGetNums, "T@cg")
	if !ok {
		t.Fatal("no item")
	}
	for _, w := range snap.Windows {
		if w.Sum != 30 || w.TPS < 0.99 || w.TPS > 1.01 {
			t.Errorf("window %v = %+v: a 30 s old item must count everything over 30 s", w.Window, w)
		}
	}
	if _, ok := s.Get(GroupGetNums, "nope"); ok {
		t.Fatal("unknown item found")
	}
}

// Puts and gets count in the same items whether their key is in the
// lock-free index or past its bound, from many goroutines at once. The
// bound is lowered: each key added copies the index, so reaching the
// default bound of 4096 keys took most of a minute under -race.
func TestBrokerStatsIndexedKeys(t *testing.T) {
	s := NewStats(nil)
	s.maxIndex = 100
	keys := s.maxIndex + 50
	n64 := int64(keys)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := strconv.Itoa((i + g*997) % keys)
				s.AddPut("T"+k, 1, 10)
				s.AddGet("g"+k, "T", 2, 20)
			}
		}()
	}
	wg.Wait()
	if n, b := s.Totals(TopicPutNums), s.Totals(TopicPutSize); n != 4*n64 || b != 40*n64 {
		t.Fatalf("puts %d, %d bytes", n, b)
	}
	if n, b := s.Totals(GroupGetNums), s.Totals(GroupGetSize); n != 8*n64 || b != 80*n64 {
		t.Fatalf("gets %d, %d bytes", n, b)
	}
	for _, k := range []string{"0", strconv.Itoa(keys - 1)} {
		put, ok1 := s.Get(TopicPutNums, "T"+k)
		get, ok2 := s.Get(GroupGetSize, "T@g"+k)
		if !ok1 || !ok2 || put.Total != 4 || get.Total != 80 {
			t.Fatalf("key %s: put %+v, get %+v", k, put, get)
		}
	}
	if len(*s.puts.Load()) != s.maxIndex || len(*s.gets.Load()) != s.maxIndex {
		t.Fatalf("indexes hold %d and %d keys", len(*s.puts.Load()), len(*s.gets.Load()))
	}
}

func TestBrokerStatsConcurrent(t *testing.T) {
	s := NewStats(nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				s.AddPut("T", 1, 10)
				if i%100 == 0 {
					s.Sample()
					s.All(TopicPutNums)
				}
			}
		}()
	}
	wg.Wait()
	if s.Totals(TopicPutNums) != 8000 {
		t.Fatalf("total %d", s.Totals(TopicPutNums))
	}
}

func TestBrokerStatsPrometheus(t *testing.T) {
	s := NewStats(nil)
	s.AddPut("Orders", 3, 300)
	s.AddGet("billing", "Orders", 2, 200)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range []string{
		`smartgo_topic_put_messages_total{topic="Orders"} 3`,
		`smartgo_topic_put_bytes_total{topic="Orders"} 300`,
		`smartgo_group_get_messages_total{group="billing",topic="Orders"} 2`,
		`smartgo_group_get_bytes_total{group="billing",topic="Orders"} 200`,
		`smartgo_topic_put_tps{topic="Orders",window="1m0s"}`,
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("metrics lack %q:\n%s", line, body)
		}
	}
}

func BenchmarkBrokerStatsAdd(b *testing.B) {
	s := NewStats(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.AddPut("TopicTest", 1, 128)
			s.AddGet("cg", "TopicTest", 1, 128)
		}
	})
}

// TestBrokerStatsForget: forgetting a topic drops its puts and every
// group's gets from it, forgetting a group its gets from every topic; the
// hot paths' indexes forget them too, so a topic created again counts
// from zero.
func TestBrokerStatsForget(t *testing.T) {
	s := NewStats(nil)
	s.AddPut("A", 5, 50)
	s.AddPut("B", 7, 70)
	s.AddGet("G", "A", 2, 20)
	s.AddGet("G", "B", 3, 30)
	s.AddGet("H", "B", 4, 40)
	s.ForgetTopic("A")
	for _, k := range []struct {
		kind StatKind
		key  string
		want bool
	}{{TopicPutNums, "A", false}, {TopicPutSize, "A", false}, {GroupGetNums, "A@G", false}, {GroupGetSize, "A@G", false},
		{TopicPutNums, "B", true}, {GroupGetNums, "B@G", true}, {GroupGetNums, "B@H", true}} {
		if _, ok := s.Get(k.kind, k.key); ok != k.want {
			t.Fatalf("after forgetting topic A: %v %s present %v, want %v", k.kind, k.key, ok, k.want)
		}
	}
	s.AddPut("A", 1, 10)
	s.AddGet("G", "A", 1, 10)
	if snap, _ := s.Get(TopicPutNums, "A"); snap.Total != 1 {
		t.Fatalf("topic A created again: total %d, want 1", snap.Total)
	}
	if snap, _ := s.Get(GroupGetNums, "A@G"); snap.Total != 1 {
		t.Fatalf("group G on topic A again: total %d, want 1", snap.Total)
	}
	s.ForgetGroup("G")
	if got := s.All(GroupGetNums); len(got) != 1 || got[0].Key != "B@H" {
		t.Fatalf("after forgetting group G: %+v", got)
	}
	s.AddGet("G", "B", 1, 10)
	if snap, _ := s.Get(GroupGetNums, "B@G"); snap.Total != 1 {
		t.Fatalf("group G created again: total %d, want 1", snap.Total)
	}
	if s.Totals(TopicPutNums) != 8 {
		t.Fatalf("puts total %d, want 8", s.Totals(TopicPutNums))
	}
}

// TestBrokerStatsPutRemembered: puts counted through the topic AddPut
// remembers land in that topic's counters, and none does once the topic
// is forgotten (a new topic's puts count from zero) or while another
// topic's puts come between.
func TestBrokerStatsPutRemembered(t *testing.T) {
	s := NewStats(nil)
	want := func(topic string, msgs, bytes int64) {
		t.Helper()
		n, ok := s.Get(TopicPutNums, topic)
		z, _ := s.Get(TopicPutSize, topic)
		if !ok || n.Total != msgs || z.Total != bytes {
			t.Fatalf("topic %s: %d msgs, %d bytes (present %v), want %d, %d", topic, n.Total, z.Total, ok, msgs, bytes)
		}
	}
	for range 3 { // added, found and remembered, taken from what is remembered
		s.AddPut("A", 1, 10)
	}
	want("A", 3, 30)
	s.ForgetTopic("A")
	if _, ok := s.Get(TopicPutNums, "A"); ok {
		t.Fatal("topic A's puts are still counted after it was forgotten")
	}
	for range 3 {
		s.AddPut("A", 2, 5)
	}
	want("A", 6, 15)
	for i := range 40 { // two topics in turn: each replaces what is remembered now and then
		s.AddPut("B", 1, 1)
		s.AddPut("A", 1, int64(i%2))
	}
	want("A", 46, 35)
	want("B", 40, 40)
	s.ForgetTopic("B")
	s.AddPut("B", 1, 7)
	want("B", 1, 7)
	want("A", 46, 35)
}

// BenchmarkBrokerStatsAddPut: the put counters of one topic, and of two
// in turn, from one goroutine and from every P.
func BenchmarkBrokerStatsAddPut(b *testing.B) {
	for _, topics := range [][]string{{"TopicTest"}, {"TopicTest", "TopicOther"}} {
		b.Run(fmt.Sprintf("topics=%d", len(topics)), func(b *testing.B) {
			s := NewStats(nil)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.AddPut(topics[i%len(topics)], 1, 1024)
				i++
			}
		})
		b.Run(fmt.Sprintf("topics=%d/parallel", len(topics)), func(b *testing.B) {
			s := NewStats(nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					s.AddPut(topics[i%len(topics)], 1, 1024)
					i++
				}
			})
		})
	}
}
